#!/usr/bin/env bash
# Installs what MD-AME needs on a fresh Debian/Ubuntu machine, and nothing twice:
# system tools (PostgreSQL server, ffmpeg, espeak-ng, fonts for captions, chromium for the UI
# test) and a Python venv.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
venv=${VENV:-$repo/.venv}
python=${PYTHON:-python3}
log() { echo "[install] $*" >&2; }

missing=()
command -v ffmpeg >/dev/null || missing+=(ffmpeg)
command -v ffprobe >/dev/null || missing+=(ffmpeg)
command -v espeak-ng >/dev/null || missing+=(espeak-ng)
command -v redis-server >/dev/null || missing+=(redis-server)  # the Celery broker (GPU workers)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || missing+=(postgresql)
fc-list 2>/dev/null | grep -qi 'DejaVu Sans' || missing+=(fonts-dejavu-core)
# The browser test of the Dagster UI (tests/ui) drives Debian's chromium with Playwright.
command -v chromium >/dev/null || missing+=(chromium)
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || { log "missing ${missing[*]}; install them (apt-get install ${missing[*]})"; exit 1; }
    sudo=sudo
  fi
  log "apt-get install ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null \
    || { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
fi

# The venv is rebuilt only when pyproject.toml changes (stamp holds its checksum).
stamp=$venv/.mdame-installed
want=$(sha256sum "$repo/pyproject.toml" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
[ -x "$venv/bin/python" ] || { log "creating $venv"; "$python" -m venv "$venv"; }
log "pip install -e .[dev,cloud,gpu,cluster,docs] (first time takes a few minutes)"
pip_log=$venv/pip-install.log
if ! { "$venv/bin/python" -m pip install -q --disable-pip-version-check --upgrade pip \
       && "$venv/bin/python" -m pip install -q --disable-pip-version-check -e "$repo[dev,cloud,gpu,cluster,docs]"; } \
       >"$pip_log" 2>&1; then
  tail -n 40 "$pip_log" >&2
  log "pip install failed (full log: $pip_log)"
  exit 1
fi
echo "$want" > "$stamp"
