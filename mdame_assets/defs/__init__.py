"""One folder per domain: assets, checks, sensors and schedules next to each other."""
