"""Encoder presets per host: the selection is a pure function of ffmpeg's listing, CUDA and
MDAME_VIDEO_ENCODER (issue 11, item 3)."""

from __future__ import annotations

import pytest

from mdame_domain.encoders import (
    H264_NVENC,
    LIBX264,
    EncoderUnavailable,
    choose_encoder,
    listed_encoders,
    parse_encoder_listing,
    video_encoder,
)

BOTH = {"libx264", "h264_nvenc", "mpeg4"}
CPU_ONLY = {"libx264", "mpeg4"}


def test_auto_prefers_nvenc_only_where_cuda_can_encode() -> None:
    assert choose_encoder("auto", BOTH, True) == H264_NVENC
    assert choose_encoder("auto", BOTH, False) == LIBX264
    assert choose_encoder("auto", CPU_ONLY, True) == LIBX264
    assert choose_encoder("", BOTH, True) == H264_NVENC  # unset means auto


def test_cuda_is_only_probed_when_nvenc_is_listed() -> None:
    asked: list[int] = []

    def probe() -> bool:
        asked.append(1)
        return True

    assert choose_encoder("auto", CPU_ONLY, probe) == LIBX264
    assert choose_encoder("libx264", BOTH, probe) == LIBX264
    assert asked == []
    assert choose_encoder("auto", BOTH, probe) == H264_NVENC
    assert asked == [1]


def test_forced_encoders() -> None:
    assert choose_encoder("libx264", BOTH, True) == LIBX264
    assert choose_encoder("H264_NVENC", BOTH, True) == H264_NVENC
    with pytest.raises(EncoderUnavailable, match="built without it"):
        choose_encoder("h264_nvenc", CPU_ONLY, True)
    with pytest.raises(EncoderUnavailable, match="no CUDA device"):
        choose_encoder("h264_nvenc", BOTH, False)
    with pytest.raises(EncoderUnavailable, match="no libx264"):
        choose_encoder("auto", {"mpeg4"}, False)
    with pytest.raises(ValueError, match="MDAME_VIDEO_ENCODER must be one of"):
        choose_encoder("x265", BOTH, True)


def test_listing_parser() -> None:
    listing = (
        "Encoders:\n V..... = Video\n ------\n"
        " V....D libx264              libx264 H.264 / AVC\n"
        " V....D h264_nvenc           NVIDIA NVENC H.264 encoder (codec h264)\n"
        " A....D aac                  AAC (Advanced Audio Coding)\n"
    )
    assert parse_encoder_listing(listing) == {"libx264", "h264_nvenc"}


def test_this_host() -> None:
    # The installed ffmpeg always has libx264; forcing it never needs a GPU.
    assert "libx264" in listed_encoders()
    assert video_encoder({"MDAME_VIDEO_ENCODER": "libx264"}) == LIBX264
    assert video_encoder({}) in (LIBX264, H264_NVENC)
    with pytest.raises(ValueError):
        video_encoder({"MDAME_VIDEO_ENCODER": "cpu"})
