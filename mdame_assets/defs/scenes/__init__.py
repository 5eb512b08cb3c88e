"""scenes stage."""
