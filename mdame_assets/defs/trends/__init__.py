"""trends stage."""
