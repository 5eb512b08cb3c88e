"""The settings model is the one place the environment is read and every variable is declared:
no product module reads os.environ itself, every variable the code names is declared, every
declared one is named by the code, and `mdame config`'s rows and the docs' configuration page
list exactly the declared variables."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from mdame_core import settings
from mdame_core.settings import REPO_ROOT, Settings
from mdame_core.settings.reader import effective

SETTINGS_PACKAGE = REPO_ROOT / "mdame_core" / "settings"
# Names shaped like variables that are not read from the environment: keys of the local
# cluster's pg.env file, constants the domain exports, and the test suite's own switch.
NOT_VARIABLES = {
    "MDAME_PG_PORT",
    "MDAME_PG_DATA",
    "GEMINI_VOICES",
    "TELEGRAM_CHAT_PATTERN",
    "MDAME_SMOKE",
}
VARIABLE = re.compile(r"^(ENV|DAGSTER_HOME|(MDAME|GEMINI|YOUTUBE|TELEGRAM)_[A-Z0-9_]+)$")
# Files outside the Python packages that name variables Dagster, a deployment or the local
# services' scripts read.
CONFIG_FILES = ("dagster.yaml", "workspace.yaml", "deploy", "scripts", "Makefile")
SHELL_VARIABLE = re.compile(r"\b(?:MDAME|GEMINI|YOUTUBE|TELEGRAM)_[A-Z0-9_]+")


def _config_text() -> str:
    text = ""
    for name in CONFIG_FILES:
        path = REPO_ROOT / name
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        text += "\n".join(f.read_text(errors="replace") for f in files)
    return text


def _product_modules() -> list[Path]:
    return sorted(
        p
        for p in REPO_ROOT.glob("mdame_*/**/*.py")
        if "__pycache__" not in p.parts and SETTINGS_PACKAGE not in p.parents
    )


def environment_reads(path: Path, root: Path = REPO_ROOT) -> list[str]:
    """`os.environ`, `os.getenv` and their imports in one module, as `path:line what`."""
    found = []
    where = path.relative_to(root)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "os"
            and node.attr in {"environ", "environb", "getenv", "putenv", "unsetenv"}
        ):
            found.append(f"{where}:{node.lineno} os.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            names = {a.name for a in node.names} & {"environ", "getenv", "putenv"}
            found += [f"{where}:{node.lineno} from os import {n}" for n in sorted(names)]
    return found


def _named_variables(path: Path) -> set[str]:
    return {
        node.value
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and VARIABLE.match(node.value)
    }


def test_no_product_module_reads_the_environment_itself() -> None:
    reads = [line for path in _product_modules() for line in environment_reads(path)]
    assert not reads, "read these through mdame_core.settings:\n" + "\n".join(reads)


def test_the_check_finds_a_read(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("import os\nfrom os import getenv\nX = os.environ.get('MDAME_X')\n")
    assert sorted(environment_reads(planted, tmp_path)) == [
        "planted.py:2 from os import getenv",
        "planted.py:3 os.environ",
    ]


def test_every_variable_the_code_names_is_declared() -> None:
    named = {name for path in _product_modules() for name in _named_variables(path)}
    undeclared = sorted(named - set(Settings.model_fields) - NOT_VARIABLES)
    assert not undeclared, f"declare these in mdame_core/settings/model.py: {undeclared}"


def test_every_variable_the_deployment_files_name_is_declared() -> None:
    named = set(SHELL_VARIABLE.findall(_config_text()))
    undeclared = sorted(named - set(Settings.model_fields) - NOT_VARIABLES)
    assert not undeclared, f"declare these in mdame_core/settings/model.py: {undeclared}"


def test_every_declared_variable_is_read_somewhere() -> None:
    readers = [*_product_modules(), SETTINGS_PACKAGE / "__init__.py"]
    named = {name for path in readers for name in _named_variables(path)}
    config_text = _config_text()
    unread = sorted(
        name for name in Settings.model_fields if name not in named and name not in config_text
    )
    assert not unread, f"declared but read nowhere (remove them or read them): {unread}"


def test_config_and_the_docs_page_list_exactly_the_declared_variables() -> None:
    declared = list(Settings.model_fields)
    rows = [row.name for row in effective({})]
    assert sorted(rows) == sorted(declared) and len(rows) == len(set(rows))
    page = settings.reference_markdown()
    on_page = re.findall(r"^\| `([A-Z0-9_]+)`", page, flags=re.M)
    assert sorted(on_page) == sorted(declared)


def test_every_variable_has_a_description_and_a_valid_default() -> None:
    for name, field in Settings.model_fields.items():
        assert field.description and len(field.description) > 10, name
        assert settings.get(name, {}) == settings.default(name)


def test_a_value_is_read_when_it_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MDAME_LOCK_TTL_S", raising=False)
    assert settings.get("MDAME_LOCK_TTL_S") == settings.default("MDAME_LOCK_TTL_S")
    monkeypatch.setenv("MDAME_LOCK_TTL_S", "7.5")
    assert settings.get("MDAME_LOCK_TTL_S") == 7.5
    monkeypatch.setenv("MDAME_LOCK_TTL_S", "")  # empty is unset, as it always was
    assert settings.get("MDAME_LOCK_TTL_S") == settings.default("MDAME_LOCK_TTL_S")


def test_a_bad_value_names_the_variable_the_value_and_what_it_takes() -> None:
    env = {
        "MDAME_LOCK_TTL_S": "soon",
        "MDAME_GPU_EXECUTOR": "gpu",
        "MDAME_FIRST_DAY": "20261101",
        "MDAME_RUN_RETENTION_DAYS": "0",
        "MDAME_DISK_LOW_PERCENT": "nan",
    }
    with pytest.raises(settings.SettingsError) as caught:
        settings.validate(env)
    message = str(caught.value)
    assert "MDAME_LOCK_TTL_S='soon' is not allowed: it takes a number > 0, in s" in message
    assert "MDAME_GPU_EXECUTOR='gpu' is not allowed: it takes one of in_process, " in message
    assert "MDAME_FIRST_DAY='20261101' is not allowed: it takes a date YYYY-MM-DD" in message
    assert "MDAME_RUN_RETENTION_DAYS='0' is not allowed: it takes a whole number > 0 <= 3650" in (
        message
    )
    assert "MDAME_DISK_LOW_PERCENT='nan'" in message
    settings.validate({})  # the defaults themselves are valid


def test_a_secret_is_masked_and_its_source_shown() -> None:
    rows = {row.name: row for row in effective({"MDAME_TELEGRAM_BOT_TOKEN": "123:abc"})}
    assert rows["MDAME_TELEGRAM_BOT_TOKEN"].source == "environment"
    assert "123:abc" not in rows["MDAME_TELEGRAM_BOT_TOKEN"].shown
    assert rows["MDAME_LOCK_TTL_S"].source == "default"


def test_choices_ignore_case() -> None:
    assert settings.get("MDAME_MEDIA_PROFILE", {"MDAME_MEDIA_PROFILE": " Tiny "}) == "tiny"
