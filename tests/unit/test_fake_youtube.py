"""The fake YouTube server on its own: the standalone entry, the control endpoint, and state
that survives a restart of the process."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from fakes.common import NamedFaults
from fakes.youtube import FAULTS
from mdame_core.settings import REPO_ROOT


def _start(state_dir: Path, *extra: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "fakes.youtube",
            "--port",
            "0",
            "--state-dir",
            str(state_dir),
            *extra,
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO_ROOT,  # fakes/ is a dev tool beside tests/, importable from the repository root
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    return proc, line.split(" on ", 1)[1].split(" ", 1)[0]


def _json(url: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=data), timeout=10) as resp:
        return json.loads(resp.read())


def test_standalone_server_with_control_endpoint_and_persistent_state(tmp_path: Path) -> None:
    proc, base = _start(tmp_path, "--channel", "@a=rt-test-not-secret")
    try:
        assert _json(base + "_fake/faults", {"fault": "initiate_5xx"})["pending"] == [
            {"fault": "initiate_5xx"}
        ]
        form = b"grant_type=refresh_token&refresh_token=rt-test-not-secret&client_id=c"
        with urllib.request.urlopen(urllib.request.Request(base + "token", data=form)) as r:
            token = json.loads(r.read())["access_token"]
        assert token.startswith("ya29.")
    finally:
        proc.terminate()
        proc.wait(10)
    proc, base = _start(tmp_path)
    try:
        state = _json(base + "_fake/state")
        assert [c["handle"] for c in state["channels"].values()] == ["@a"]
        assert token in state["tokens"]
    finally:
        proc.terminate()
        proc.wait(10)


def test_faults_are_first_in_first_out_per_kind() -> None:
    q = NamedFaults(FAULTS)
    q.push("short_range")
    q.push("initiate_5xx")
    q.push("short_range", note=2)
    assert q.take("initiate_5xx") == {"fault": "initiate_5xx"}
    assert q.take("short_range") == {"fault": "short_range"}
    assert q.take("short_range") == {"fault": "short_range", "note": 2}
    with pytest.raises(ValueError, match="unknown fault"):
        q.push("meteor")
