"""Dagster definitions: the orchestrator code location (orchestrator.py, loading defs/) and the
GPU code location (gpu.py, loading gpu_defs/), and what their stages share (jobs, partitions,
resources). What runs them (step runtime, executors, run server, liveness) is mdame_runtime."""
