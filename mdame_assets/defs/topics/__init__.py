"""topics stage."""
