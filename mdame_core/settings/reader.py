"""Reading the declared settings (model.py): one variable at the moment it is needed, so a
test or a harness that sets it sees its value, or all of them at start-up, so that a bad value
fails before any work starts. The process environment is read here and nowhere else."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import SecretStr, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from mdame_core.settings.model import GROUPS, Settings


class SettingsError(ValueError):
    """A setting is missing or wrong; the message says which and how to fix it. A ValueError,
    as the readers that each checked their own variable raised."""


def declared(name: str) -> FieldInfo:
    try:
        return Settings.model_fields[name]
    except KeyError:
        raise KeyError(f"{name} is not a declared setting (mdame_core/settings/model.py)") from None


@functools.cache
def _adapter(name: str) -> TypeAdapter[Any]:
    return TypeAdapter(_annotated(declared(name)))


def _annotated(field: FieldInfo) -> Any:
    """The field's type with its constraints (bounds, finiteness), as a TypeAdapter takes it."""
    if not field.metadata:
        return field.annotation
    return Annotated[(field.annotation, *field.metadata)]


@functools.cache
def _is_choice(name: str) -> bool:
    return "Literal" in str(declared(name).annotation)


def is_secret(name: str) -> bool:
    return "SecretStr" in str(declared(name).annotation)


def raw(name: str, environ: Mapping[str, str] | None = None) -> str:
    """The variable's text as set, stripped; "" when unset or empty."""
    declared(name)
    env = os.environ if environ is None else environ
    return (env.get(name) or "").strip()


def is_set(name: str, environ: Mapping[str, str] | None = None) -> bool:
    return bool(raw(name, environ))


def default(name: str) -> Any:
    return declared(name).get_default(call_default_factory=True)


def get(name: str, environ: Mapping[str, str] | None = None) -> Any:
    """The variable's value, of its declared type, else its default. A secret comes back as
    its plain text (callers hand it to a client, never to a log); unset, it is None."""
    text = raw(name, environ)
    if not text:
        return default(name)
    if _is_choice(name):
        text = text.lower()  # a choice's names are lower case; DEV or Tiny mean the same
    try:
        value = _adapter(name).validate_python(text)
    except ValidationError:
        raise SettingsError(_problem(name, text)) from None
    return value.get_secret_value() if isinstance(value, SecretStr) else value


def _problem(name: str, text: str) -> str:
    shown = "(a secret, not shown)" if is_secret(name) else repr(text)
    return f"{name}={shown} is not allowed: it takes {allowed(name)}"


def allowed(name: str) -> str:
    """What the variable takes, in words: its type, bounds and unit."""
    declared(name)
    schema = _adapter(name).json_schema()
    options = [s for s in schema.get("anyOf", [schema]) if s.get("type") != "null"]
    words = []
    for option in options:
        if "enum" in option:
            words.append("one of " + ", ".join(map(str, option["enum"])))
            continue
        kind = {"integer": "a whole number", "number": "a number", "boolean": "true or false"}
        text = kind.get(option.get("type", ""), "text")
        if option.get("format") == "date":
            text = "a date YYYY-MM-DD"
        elif option.get("format") == "password":
            text = "text (a secret)"
        bounds = [
            f"{word} {option[key]:g}"
            for key, word in (("exclusiveMinimum", ">"), ("minimum", ">="), ("maximum", "<="))
            if key in option
        ]
        words.append(" ".join([text, *bounds]))
    unit = unit_of(name)
    return " or ".join(words) + (f", in {unit}" if unit else "")


def unit_of(name: str) -> str:
    extra = declared(name).json_schema_extra
    return str(extra.get("unit", "")) if isinstance(extra, dict) else ""


def shown_default(name: str) -> str:
    """The default as the docs state it: a computed one in words, else the value."""
    extra = declared(name).json_schema_extra
    shown = str(extra.get("shown", "")) if isinstance(extra, dict) else ""
    if shown:
        return shown
    value = default(name)
    if value is None or value == "":
        return "unset"
    return str(value).lower() if isinstance(value, bool) else str(value)


def validate(environ: Mapping[str, str] | None = None) -> None:
    """Every declared variable at once; raises SettingsError listing each bad one with its value
    (a secret's is not shown) and what it takes. Code locations and commands call this first."""
    env = os.environ if environ is None else environ
    problems = []
    for name in Settings.model_fields:
        try:
            get(name, env)
        except SettingsError as exc:
            problems.append(str(exc))
    if problems:
        raise SettingsError("bad settings:\n  " + "\n  ".join(problems))


@dataclass(frozen=True)
class Effective:
    """One variable as this process sees it, for `mdame config`."""

    group: str
    name: str
    shown: str  # the value, a secret masked
    source: str  # "environment" or "default"
    description: str


def effective(environ: Mapping[str, str] | None = None) -> Iterator[Effective]:
    env = os.environ if environ is None else environ
    for group in GROUPS:
        title = (group.__doc__ or group.__name__).strip().splitlines()[0]
        for name, field in group.model_fields.items():
            if name not in group.__annotations__:
                continue
            text = raw(name, env)
            if not text:
                shown, source = shown_default(name), "default"
            elif is_secret(name):
                shown, source = "****** (set)", "environment"
            else:
                shown, source = text, "environment"
            yield Effective(title, name, shown, source, field.description or "")


def environment() -> dict[str, str]:
    """A copy of this process's environment, for a child process's (Celery workers, run
    workers) or for code that takes the environment as a mapping."""
    return dict(os.environ)


def set_variable(name: str, value: str) -> None:
    """Set a variable for this process and its children (a command's defaults: ENV, the log)."""
    os.environ[name] = value


def set_default(name: str, value: str) -> str:
    """Set the variable unless it is set; its value either way."""
    if not os.environ.get(name):
        os.environ[name] = value
    return os.environ[name]


def os_variable(name: str) -> str:
    """One of the operating system's own variables (TMPDIR, NO_PROXY, PYTHONPATH), which are
    not MD-AME's settings: "" when unset."""
    return os.environ.get(name, "")
