"""The orchestrator code location's definitions (mdame_assets/orchestrator.py loads this
folder), one folder per domain: assets, checks, sensors and schedules next to each other."""
