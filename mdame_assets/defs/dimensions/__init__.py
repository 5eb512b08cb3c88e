"""dimensions stage."""
