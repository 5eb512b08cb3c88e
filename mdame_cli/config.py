"""`mdame config [--set] [--long] [--json]`: every declared setting (mdame_core/settings/model.py)
with its effective value and where that came from, group by group, and which database is in use.

    variable                            source       value
    Deployment: where things are and which providers run
      ENV                               environment  dev
      MDAME_HOME                        default      .mdame

A secret is shown as "****** (set)", never its value. A default computed from another setting is
shown in words (the configuration page's wording). --set keeps the variables set in the
environment, --long adds each one's description under it, --json prints the same as one object.

The settings are validated first; a bad value does not stop the table: its row is marked "!" and
the command ends with one line per bad variable on stderr (its value withheld for a secret) and
exit 1, as every other command does at start-up.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import textwrap
from dataclasses import asdict, dataclass
from typing import Any

from mdame_core import settings

WIDTH = 100
NAME_WIDTH = max(len(name) for name in settings.Settings.model_fields)
SOURCE_WIDTH = len("environment")
VALUE_COLUMN = 2 + NAME_WIDTH + 2 + SOURCE_WIDTH + 2


@dataclass(frozen=True)
class Row:
    group: str
    name: str
    value: str  # a secret masked, a computed default in words
    source: str  # environment | default
    description: str
    problem: str  # why the value is refused; "" when it is fine


def problems() -> dict[str, str]:
    """Each variable whose value is refused, with the reader's message (variable, value, what it
    takes; a secret's value withheld). Empty when settings.validate() passes."""
    try:
        settings.validate()
    except settings.SettingsError:
        pass
    else:
        return {}
    bad = {}
    for name in settings.Settings.model_fields:
        try:
            settings.get(name)
        except settings.SettingsError as exc:
            bad[name] = str(exc)
    return bad


def rows(only_set: bool = False, env_defaulted: bool = False) -> list[Row]:
    """The table's rows. `env_defaulted`: this command set ENV to its default (dev) itself,
    so it is shown as a default, not as set in the environment."""
    bad = problems()
    table = []
    for e in settings.effective():
        source = "default" if env_defaulted and e.name == "ENV" else e.source
        if only_set and source != "environment":
            continue
        table.append(Row(e.group, e.name, e.shown, source, e.description, bad.get(e.name, "")))
    return table


def database_in_use() -> str:
    """Which database the commands connect to, in words (never a password)."""
    if settings.is_external():
        return "an external database: MDAME_DATABASE_URL, as its owner"
    envfile = settings.mdame_home() / "pg.env"
    try:
        url = settings.database_url("owner")  # the local cluster's URLs carry no password
    except settings.SettingsError:
        return f"the local cluster, not started: `make db` (it writes {envfile})"
    return f"the local cluster {url} ({envfile})"


def render(table: list[Row], long: bool = False) -> str:
    lines = [f"  {'variable':<{NAME_WIDTH}}  {'source':<{SOURCE_WIDTH}}  value"]
    database_shown = False
    for group, members in itertools.groupby(table, key=lambda row: row.group):
        lines.append(group)
        for row in members:
            mark = "!" if row.problem else " "
            lead = f"{mark} {row.name:<{NAME_WIDTH}}  {row.source:<{SOURCE_WIDTH}}  "
            value = row.value + (" (refused)" if row.problem else "")
            lines.append(lead + _wrapped(value, VALUE_COLUMN))
            if long and row.description:
                lines.append(" " * 4 + _wrapped(row.description, 4))
        if group.startswith("Database"):
            lines.append(_database_line())
            database_shown = True
    if not database_shown:  # --set without a database variable set
        lines += ["Database", _database_line()]
    return "\n".join(lines)


def _database_line() -> str:
    return "  in use: " + _wrapped(database_in_use(), 10)


def _wrapped(text: str, column: int) -> str:
    """`text` from `column` on, continued at that column: a line stays within WIDTH unless one
    word (a path, a URL) is longer than the room left."""
    parts = textwrap.wrap(text, WIDTH - column, break_long_words=False, break_on_hyphens=False) or [
        ""
    ]
    return ("\n" + " " * column).join(parts)


def as_json(table: list[Row]) -> dict[str, Any]:
    return {
        "variables": [asdict(row) for row in table],
        "database": database_in_use(),
        "problems": [row.problem for row in table if row.problem],
    }


def show(args: argparse.Namespace) -> int:
    table = rows(only_set=args.set, env_defaulted=getattr(args, "env_defaulted", False))
    if args.json:
        print(json.dumps(as_json(table), indent=2))
    else:
        print(render(table, long=args.long))
    refused = [row.problem for row in table if row.problem]
    # --set hides default rows, but a default is never refused: every problem is in the table.
    for problem in refused:
        print(f"mdame: error: {problem}", file=sys.stderr)
    return 1 if refused else 0


def add_parser(groups: Any) -> None:
    parser = groups.add_parser(
        "config", help="every setting's effective value and where it came from (secrets masked)"
    )
    parser.add_argument(
        "--set", action="store_true", help="only the variables set in the environment"
    )
    parser.add_argument("--long", action="store_true", help="each variable's description too")
    parser.add_argument("--json", action="store_true", help="one JSON object")
    parser.set_defaults(func=show)
