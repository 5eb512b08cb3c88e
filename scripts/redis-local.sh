#!/usr/bin/env bash
# The project-local Redis (the Celery broker and result backend): start (idempotent), stop,
# status, url. Data, log and pid file under $MDAME_HOME/redis; the port is derived from the
# checkout's path like scripts/db-local.sh derives PostgreSQL's, and recorded in
# $MDAME_HOME/redis.env. MDAME_REDIS_PORT overrides it; MDAME_REDIS_BIND (default 127.0.0.1)
# opens it to other hosts, which then needs MDAME_REDIS_PASSWORD (docs/deployment.md).
set -euo pipefail

cmd=${1:-start}
repo=$(cd "$(dirname "$0")/.." && pwd)
home=${MDAME_HOME:-$repo/.mdame}
envfile=$home/redis.env
dir=$home/redis

log() { echo "[redis-local] $*" >&2; }

server=${MDAME_REDIS_SERVER:-$(command -v redis-server || echo /usr/bin/redis-server)}
cli=$(dirname "$server")/redis-cli
[ -x "$server" ] || { log "redis-server not found (install: apt-get install redis-server)"; exit 1; }

if [ -f "$envfile" ] && [ -z "${MDAME_REDIS_PORT:-}" ]; then
  # shellcheck disable=SC1090
  . "$envfile"
fi
# 40000-49999: clear of db-local.sh's 20000-39999, so the two never collide for one checkout.
port=${MDAME_REDIS_PORT:-$(( 40000 + $(printf '%s' "$repo" | cksum | cut -d' ' -f1) % 10000 ))}
bind=${MDAME_REDIS_BIND:-127.0.0.1}
mkdir -p "$dir"
printf 'MDAME_REDIS_PORT=%s\n' "$port" > "$envfile.tmp" && mv "$envfile.tmp" "$envfile"

# redis-cli reads the password from the environment (never on a command line ps shows).
[ -n "${MDAME_REDIS_PASSWORD:-}" ] && export REDISCLI_AUTH=$MDAME_REDIS_PASSWORD
rcli() { "$cli" -h 127.0.0.1 -p "$port" "$@"; }
ping() { rcli ping 2>/dev/null | grep -q PONG; }

case "$cmd" in
  start)
    if ping; then log "already running on $bind:$port ($dir)"; exit 0; fi
    if [ "$bind" != 127.0.0.1 ] && [ -z "${MDAME_REDIS_PASSWORD:-}" ]; then
      log "MDAME_REDIS_BIND=$bind opens Redis to other hosts: set MDAME_REDIS_PASSWORD too"; exit 2
    fi
    conf=()
    # The password goes in through stdin's config, not the command line (ps would show it).
    [ -n "${MDAME_REDIS_PASSWORD:-}" ] && conf=(-)
    # appendonly: queued steps (acknowledged only when done) survive a Redis restart.
    { [ -n "${MDAME_REDIS_PASSWORD:-}" ] && printf 'requirepass "%s"\n' "$MDAME_REDIS_PASSWORD"; true; } |
      "$server" "${conf[@]}" --port "$port" --bind "$bind" --daemonize yes --dir "$dir" \
        --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --appendonly yes --save ""
    for _ in $(seq 50); do ping && break; sleep 0.1; done
    ping || { log "redis-server did not answer on $port; see $dir/redis.log"; exit 1; }
    log "ready: redis://127.0.0.1:$port/0"
    ;;
  stop)
    if ping; then
      rcli shutdown nosave >/dev/null 2>&1 || true
      for _ in $(seq 50); do ping || break; sleep 0.1; done
      log "stopped"
    else
      log "not running"
    fi
    ;;
  status)
    if ping; then echo "running on $bind:$port ($dir)"; else echo "stopped ($dir)"; exit 3; fi
    ;;
  url)
    echo "redis://127.0.0.1:$port/0"
    ;;
  *) log "usage: $0 start|stop|status|url"; exit 2 ;;
esac
