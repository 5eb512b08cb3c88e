"""Plain domain logic for MD-AME: no Dagster, no provider SDKs, deterministic."""
