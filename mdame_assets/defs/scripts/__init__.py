"""scripts stage."""
