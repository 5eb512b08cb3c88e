"""Dagster definitions: the orchestrator code location (orchestrator.py, loading defs/) and the
GPU code location (gpu.py, loading gpu_defs/), and what their stages share (runtime.py, jobs,
partitions, executors, resources)."""
