"""renders stage."""
