"""ffmpeg: libx264 (required); h264_nvenc (reported; required when
MDAME_VIDEO_ENCODER=h264_nvenc)."""

from __future__ import annotations

from mdame_cli.doctor.context import Doctor
from mdame_core import settings
from mdame_domain.doctor import Status, first_line


def check_ffmpeg(doctor: Doctor) -> None:
    from mdame_domain.encoders import ENCODER_ENV, listed_encoders, nvenc_usable
    from mdame_domain.mediatools import MediaToolError

    try:
        names = listed_encoders()
    except (MediaToolError, OSError) as exc:
        doctor.add("ffmpeg", Status.FAIL, f"`ffmpeg -encoders` failed: {first_line(str(exc))}")
        return
    if "libx264" in names:
        doctor.add("ffmpeg:libx264", Status.OK, "listed (the CPU encoder every render can use)")
    else:
        doctor.add("ffmpeg:libx264", Status.FAIL, "this ffmpeg has no libx264 encoder")
    requested = settings.get(ENCODER_ENV)
    required = requested == "h264_nvenc"
    if "h264_nvenc" not in names:
        doctor.add(
            "ffmpeg:h264_nvenc",
            Status.FAIL if required else Status.SKIP,
            "not in this ffmpeg build" + (f" ({ENCODER_ENV}=h264_nvenc)" if required else ""),
        )
    elif nvenc_usable():
        doctor.add("ffmpeg:h264_nvenc", Status.OK, "listed, and a test encode works on this host")
    else:
        doctor.add(
            "ffmpeg:h264_nvenc",
            Status.FAIL if required else Status.SKIP,
            "listed, but no CUDA device here can encode with it"
            + (f" ({ENCODER_ENV}=h264_nvenc)" if required else ": renders use libx264"),
        )
