#!/usr/bin/env bash
# The project-local PostgreSQL cluster: start (idempotent), stop, status.
# Skipped entirely when MDAME_DATABASE_URL points at an external database.
# Layout and port are recorded in $MDAME_HOME/pg.env so the Python side finds them.
set -euo pipefail

cmd=${1:-start}
repo=$(cd "$(dirname "$0")/.." && pwd)
home=${MDAME_HOME:-$repo/.mdame}
envfile=$home/pg.env

log() { echo "[db-local] $*" >&2; }

if [ -n "${MDAME_DATABASE_URL:-}" ]; then
  log "MDAME_DATABASE_URL is set: using the external database, no local cluster"
  exit 0
fi

pgbin=${MDAME_PG_BIN:-}
if [ -z "$pgbin" ]; then
  for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && pgbin=$d; done
  [ -n "$pgbin" ] || pgbin=$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/initdb)")
fi
[ -x "$pgbin/initdb" ] || { log "PostgreSQL server binaries not found (install: apt-get install postgresql)"; exit 1; }

# As root, the server must run as an unprivileged user (initdb refuses root).
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

if [ -f "$envfile" ]; then
  # shellcheck disable=SC1090
  . "$envfile"
else
  # A port derived from the checkout's path, so two clones on one machine do not collide.
  port=${MDAME_PG_PORT:-$(( 20000 + $(printf '%s' "$repo" | cksum | cut -d' ' -f1) % 20000 ))}
  pgdata=$home/pg/data
  if [ "$(id -u)" = 0 ] && ! runuser -u postgres -- test -x "$repo" 2>/dev/null; then
    # The postgres user cannot reach the checkout: keep the cluster under /var/tmp instead.
    pgdata=/var/tmp/mdame-pg-$(printf '%s' "$repo" | cksum | cut -d' ' -f1)/data
  fi
  mkdir -p "$home"
  printf 'MDAME_PG_PORT=%s\nMDAME_PG_DATA=%s\n' "$port" "$pgdata" > "$envfile.tmp"
  mv "$envfile.tmp" "$envfile"
  MDAME_PG_PORT=$port; MDAME_PG_DATA=$pgdata
fi
port=$MDAME_PG_PORT
pgdata=$MDAME_PG_DATA
logfile=$(dirname "$pgdata")/server.log

running() { as_pg "$pgbin/pg_ctl" -D "$pgdata" status >/dev/null 2>&1; }

psql_super() { "$pgbin/psql" -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres "$@"; }

case "$cmd" in
  start)
    if [ ! -f "$pgdata/PG_VERSION" ]; then
      mkdir -p "$pgdata"
      [ "$(id -u)" = 0 ] && chown -R postgres: "$(dirname "$pgdata")"
      chmod 700 "$pgdata"
      log "initdb $pgdata"
      as_pg "$pgbin/initdb" -D "$pgdata" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
      # A development cluster on loopback only. fsync off trades OS-crash durability for speed;
      # a committed transaction still survives a server crash or `pg_ctl stop -m immediate`.
      cat >> "$pgdata/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = ''
max_connections = 300
shared_buffers = 128MB
fsync = off
full_page_writes = off
synchronous_commit = on
log_min_messages = warning
CONF
    fi
    if running; then
      log "cluster already running on 127.0.0.1:$port ($pgdata)"
    else
      log "starting cluster on 127.0.0.1:$port"
      as_pg "$pgbin/pg_ctl" -D "$pgdata" -l "$logfile" -w -t 60 start >/dev/null
    fi
    # Roles and databases: idempotent.
    psql_super -d postgres <<'SQL'
SELECT 'CREATE ROLE mdame_owner LOGIN CREATEDB' WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'mdame_owner') \gexec
SELECT 'CREATE ROLE mdame_app LOGIN' WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'mdame_app') \gexec
SELECT 'CREATE ROLE mdame_admin NOLOGIN' WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'mdame_admin') \gexec
SET client_min_messages = warning;
GRANT mdame_app TO mdame_owner;
GRANT mdame_admin TO mdame_owner;
SELECT 'CREATE DATABASE mdame OWNER mdame_owner' WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'mdame') \gexec
SELECT 'CREATE DATABASE dagster OWNER mdame_owner' WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = 'dagster') \gexec
SQL
    log "ready: postgresql://mdame_app@127.0.0.1:$port/mdame"
    ;;
  stop)
    if running; then as_pg "$pgbin/pg_ctl" -D "$pgdata" -m fast -w stop >/dev/null; log "stopped"; else log "not running"; fi
    ;;
  kill)
    # Crash simulation for tests: immediate shutdown, no checkpoint.
    as_pg "$pgbin/pg_ctl" -D "$pgdata" -m immediate -w stop >/dev/null
    ;;
  status)
    if running; then echo "running on 127.0.0.1:$port ($pgdata)"; else echo "stopped ($pgdata)"; exit 3; fi
    ;;
  *) log "usage: $0 start|stop|kill|status"; exit 2 ;;
esac
