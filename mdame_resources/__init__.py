"""Dagster ConfigurableResources: the state store (PostgreSQL RPC client), the media store and
the providers (LLM, safety, TTS, visuals, trends, publishers, notifier)."""
