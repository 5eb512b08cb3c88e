"""disk: free bytes under MDAME_HOME (and a local media store): FAIL under --min-free-gb, WARN
under twice that."""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

from mdame_cli.doctor.context import Doctor
from mdame_core import settings
from mdame_domain.doctor import Status, disk_verdict, human_bytes


def check_disk(doctor: Doctor) -> None:
    from mdame_domain.media_url import (
        MEDIA_URL_ENV,
        LocalMediaUrl,
        MediaUrlError,
        parse_media_url,
    )
    from mdame_resources.media import media_root

    places = {"home": settings.mdame_home()}
    with contextlib.suppress(MediaUrlError):
        parsed = parse_media_url(settings.get(MEDIA_URL_ENV))
        if isinstance(parsed, LocalMediaUrl):
            places["media"] = Path(parsed.path) if parsed.path else media_root()
    seen: set[int] = set()
    for what, path in places.items():
        existing = _existing_parent(path)
        device = existing.stat().st_dev
        if device in seen:
            continue  # the same filesystem: one row
        seen.add(device)
        free = shutil.disk_usage(existing).free
        status = disk_verdict(free, doctor.options.min_free_bytes)
        warn = ", WARN under twice it" if status is Status.WARN else ""
        doctor.add(
            f"disk:{what}",
            status,
            f"{human_bytes(free)} free under {path} (threshold "
            f"{human_bytes(doctor.options.min_free_bytes)}{warn})",
        )


def _existing_parent(path: Path) -> Path:
    path = path.resolve()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path
