"""publications stage."""
