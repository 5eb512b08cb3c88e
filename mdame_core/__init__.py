"""MD-AME core: settings, the PostgreSQL state store client, migrations and the CLI."""
