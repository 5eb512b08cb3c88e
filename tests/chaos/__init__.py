"""The crash harness (`make chaos`): kill the pipeline at every commit boundary, rerun it,
and check that it converges to the clean run's end state (see harness.py)."""
