"""The generated engine's plain rules: settings and their prices, the request, the work key
and what makes an answer's image usable."""

from __future__ import annotations

import pytest

from fakes import imagery
from mdame_domain.generated_stills import (
    IMAGE_PRICES_MICROS,
    GeneratedSettings,
    generated_settings,
    still_prompt,
    still_size,
    still_work_key,
)
from mdame_domain.model_output import InvalidModelOutput
from mdame_domain.paid_calls import UnknownPrice


def test_settings_default_to_the_priced_image_model_and_take_a_dimensions_own():
    default = generated_settings(None)
    assert (default.model, default.aspect_ratio) == ("gemini-2.5-flash-image", "9:16")
    assert default.price_micros == IMAGE_PRICES_MICROS["gemini-2.5-flash-image"] == 39_000
    own = generated_settings({"model": "gemini-3-pro-image", "usd_per_image": 0.134})
    assert own.price_micros == 134_000 and own.key() == "gemini-3-pro-image:9:16"
    with pytest.raises(UnknownPrice, match="set generated.usd_per_image"):
        _ = GeneratedSettings(model="gemini-3-pro-image").price_micros


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"modle": "x"}, "unknown keys \\['modle'\\]"),
        ({"usd_per_image": -1}, "usd_per_image must be 0-5.0 dollars"),
        ({"usd_per_image": True}, "usd_per_image must be"),
        ({"aspect_ratio": "5:4"}, "aspect_ratio must be one of 1:1"),
        ({"model": " "}, "must name a Gemini image model"),
    ],
)
def test_bad_settings_are_refused_naming_the_key(data, message):
    with pytest.raises(ValueError, match=message):
        generated_settings(data)


def test_one_work_key_per_scene_model_and_candidate():
    settings = GeneratedSettings()
    key = still_work_key("tech", "scene-1", settings)
    assert key == still_work_key("tech", "scene-1", settings, 0)
    others = {
        still_work_key("tech", "scene-1", settings, 1),
        still_work_key("tech", "scene-2", settings),
        still_work_key("science", "scene-1", settings),
        still_work_key("tech", "scene-1", GeneratedSettings(aspect_ratio="3:4")),
        still_work_key("tech", "scene-1", GeneratedSettings("m-2", 0.01)),
    }
    assert key not in others and len(others) == 5
    with pytest.raises(ValueError):
        still_work_key("tech", "scene-1", settings, -1)


def test_the_request_asks_for_the_scene_without_words_on_it():
    prompt = still_prompt("Wide shot showing telescope, cinematic")
    assert prompt.startswith("Wide shot showing telescope, cinematic\n")
    assert "no text" in prompt and imagery.depicted_word(prompt) == "telescope"
    with pytest.raises(ValueError):
        still_prompt("  ")


def test_a_png_or_jpeg_still_is_read_from_its_header_and_anything_else_is_unusable():
    png = imagery.picture_png("telescope", 144, 256)
    assert still_size(png) == ("image/png", 144, 256)
    jpeg = imagery._ffmpeg(["-i", "pipe:0", "-f", "image2pipe", "-vcodec", "mjpeg", "-"], stdin=png)
    assert still_size(jpeg) == ("image/jpeg", 144, 256)
    with pytest.raises(InvalidModelOutput, match="too small"):
        still_size(imagery.picture_png("telescope", 32, 32))
    for junk in (b"", b"GIF89a" + bytes(40), png[:20]):
        with pytest.raises(InvalidModelOutput, match="neither a PNG nor a JPEG"):
            still_size(junk)
