"""The recovery pass: stalled work from crashed runs goes before new work."""
