"""clips stage."""
