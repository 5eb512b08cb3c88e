"""MD-AME core: settings, the PostgreSQL state-store client, migrations and the CLI."""

from mdame_core.logs import quiet_http_clients

# Every process that runs our code imports this package first (the CLI, the code servers, the
# run servers and the run workers they fork or spawn, step workers, the daemon's run launcher):
# no HTTP client library logs a request URL, which may carry a token, in any of them.
quiet_http_clients()
