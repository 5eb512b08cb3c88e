"""Reading dimensions: one YAML file (load_dimension_file), a folder of them into a Registry that
carries on past a bad file (load_registry), and the form the registry stores in PostgreSQL back
into a DimensionConfig (dimension_from_json)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from mdame_domain.adaptive import AdaptiveLimits
from mdame_domain.captions import CaptionStyle
from mdame_domain.dimensions.config import DimensionConfig
from mdame_domain.dimensions.media import MusicSettings, VoiceSettings, visuals_from_json
from mdame_domain.dimensions.parsing import parse_dimension
from mdame_domain.dimensions.publishing import (
    AlertSettings,
    InstagramSettings,
    PublishingAccount,
    TikTokSettings,
    YouTubeSettings,
)
from mdame_domain.dimensions.reader import DimensionConfigError
from mdame_domain.feed_sources import source_from_json
from mdame_domain.retention import RetentionSettings

# libyaml's loader where PyYAML was built with it: the same safe schema, about ten times faster,
# which the registry sensor needs when it reads a thousand niche files every minute.
_SAFE_LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_dimension_file(path: Path) -> DimensionConfig:
    source = str(path)
    try:
        data = yaml.load(path.read_text(encoding="utf-8"), Loader=_SAFE_LOADER)  # noqa: S506
    except yaml.YAMLError as exc:
        raise DimensionConfigError(source, "<yaml>", f"not valid YAML: {exc}") from exc
    config = parse_dimension(data, source)
    if config.slug != path.stem:
        raise DimensionConfigError(source, "slug", f"must match the file name ({path.stem!r})")
    return config


@dataclass(frozen=True)
class Registry:
    dimensions: tuple[DimensionConfig, ...]
    errors: tuple[DimensionConfigError, ...]

    def by_slug(self) -> dict[str, DimensionConfig]:
        return {d.slug: d for d in self.dimensions}


def load_registry(folder: Path) -> Registry:
    """Every *.yaml in `folder`; a bad file is reported in `errors` and does not stop the rest."""
    return RegistryReader().load(folder)


# A file's (size, modification time, change time), and what parsing it gave.
_Parsed = tuple[tuple[int, int, int], DimensionConfig | DimensionConfigError]


class RegistryReader:
    """load_registry that keeps what it parsed: a file is parsed again only once its size or its
    modification or change time differ. The registry sensor reads the folder every minute, and
    parsing every file was most of its tick with a thousand of them."""

    def __init__(self) -> None:
        self._parsed: dict[
            Path, tuple[tuple[int, int, int], DimensionConfig | DimensionConfigError]
        ] = {}

    def load(self, folder: Path) -> Registry:
        dimensions, errors = [], []
        seen: dict[Path, _Parsed] = {}
        for path in sorted(folder.glob("*.yaml")):
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue  # removed while the folder was listed
            key = (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)
            found = self._parsed.get(path)
            if found is None or found[0] != key:
                try:
                    found = (key, load_dimension_file(path))
                except DimensionConfigError as exc:
                    found = (key, exc)
            seen[path] = found
            parsed = found[1]
            if isinstance(parsed, DimensionConfigError):
                errors.append(parsed)
            else:
                dimensions.append(parsed)
        self._parsed = seen  # a removed file is forgotten
        return Registry(tuple(dimensions), tuple(errors))


def dimension_from_json(data: Mapping[str, Any]) -> DimensionConfig:
    """The inverse of DimensionConfig.to_json (the registry stores that form in PostgreSQL)."""
    fields = dict(data)
    fields["accounts"] = tuple(PublishingAccount(**a) for a in fields.get("accounts", ()))
    for name in ("palette", "feeds", "keywords", "blocked_terms", "publish_to"):
        fields[name] = tuple(fields.get(name, ()))
    fields["sources"] = tuple(source_from_json(s) for s in fields.get("sources", ()))
    if "required_reviews" in fields:  # configs stored before it existed keep the default
        fields["required_reviews"] = tuple(fields["required_reviews"])
    if "youtube" in fields:  # configs stored before the field existed keep its default
        yt = dict(fields["youtube"])
        yt["hashtags"] = tuple(yt.get("hashtags", ()))
        yt["tags"] = None if yt.get("tags") is None else tuple(yt["tags"])
        fields["youtube"] = YouTubeSettings(**yt)
    for name, settings in (("tiktok", TikTokSettings), ("instagram", InstagramSettings)):
        if name in fields:  # configs stored before the field existed keep its default
            block = dict(fields[name])
            block["hashtags"] = None if block.get("hashtags") is None else tuple(block["hashtags"])
            fields[name] = settings(**block)
    if "tts" in fields:  # configs stored before it existed keep the default
        fields["tts"] = VoiceSettings(**fields["tts"])
    if "visuals" in fields:  # configs stored before the field existed keep its default
        fields["visuals"] = visuals_from_json(fields["visuals"])
    if "music" in fields:  # configs stored before the field existed keep its default
        fields["music"] = MusicSettings(**fields["music"])
    if "duration_range_s" in fields:  # configs stored before the field existed keep its default
        fields["duration_range_s"] = tuple(fields["duration_range_s"])
    if "gemini_prices" in fields:
        fields["gemini_prices"] = tuple(tuple(p) for p in fields["gemini_prices"])
    if "captions" in fields:  # configs stored before the field existed keep its default
        fields["captions"] = CaptionStyle(**fields["captions"])
    if "adaptive" in fields:  # configs stored before the field existed keep its default
        limits: dict[str, Any] = {
            k: tuple(v) if isinstance(v, list) else v for k, v in fields["adaptive"].items()
        }
        fields["adaptive"] = AdaptiveLimits(**limits)
    if "retention" in fields:  # configs stored before the field existed keep its default
        fields["retention"] = RetentionSettings(**fields["retention"])
    if "alerts" in fields:  # configs stored before the field existed keep its default
        fields["alerts"] = AlertSettings(**fields["alerts"])
    return DimensionConfig(**fields)
