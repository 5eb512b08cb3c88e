"""Dagster definitions: the orchestrator code location and the GPU code location."""
