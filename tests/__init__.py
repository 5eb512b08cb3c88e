"""The test suite, and the test machinery it shares with `make chaos` (tests.chaos)."""
