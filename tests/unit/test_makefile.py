"""The Makefile keeps its promises: every .PHONY target has a rule, and `make help` names the
targets a reader of the README looks for."""

from __future__ import annotations

import re
import subprocess

from mdame_core.settings import REPO_ROOT

MAKEFILE = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")


def test_every_phony_target_has_a_rule() -> None:
    phony = {
        name for line in re.findall(r"^\.PHONY:(.*)$", MAKEFILE, re.M) for name in line.split()
    }
    rules = set(re.findall(r"^([A-Za-z][\w-]*)\s*:(?!=)", MAKEFILE, re.M))
    assert phony, "no .PHONY line"
    assert phony <= rules, f"declared .PHONY without a rule: {sorted(phony - rules)}"


def test_make_help_lists_chaos_and_clean() -> None:
    done = subprocess.run(
        ["make", "-s", "help"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    listed = set(re.findall(r"^make ([\w-]+)", done.stdout, re.M))
    assert {"demo", "test", "docs", "ui", "chaos", "clean"} <= listed, done.stdout


def test_clean_keeps_the_venv_and_the_local_state() -> None:
    done = subprocess.run(
        ["make", "-n", "clean"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert "rm -rf" in done.stdout
    for kept in (".venv ", ".mdame ", ".mdame/pg", ".mdame/media", ".mdame/outbox"):
        assert f"rm -rf {kept}" not in done.stdout and f" {kept.strip()} " not in done.stdout
