"""voice stage."""
