"""The GPU code location's definitions (mdame_assets/gpu.py loads this folder)."""
