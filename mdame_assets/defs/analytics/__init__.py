"""Analytics: what viewers did with the published videos."""
