"""The local servers' picture convention (fakes/imagery.py): what a fake image model draws, a
fake stock server serves and the fake image judge reads back, through what the product does to
a picture on the way (a JPEG keyframe, a 9:16 crop, a slow zoom)."""

from __future__ import annotations

from fakes import imagery

NARRATION = "Webb spots water vapor on a distant planet"


def _jpeg(image: bytes, vf: str = "null") -> bytes:
    return imagery._ffmpeg(
        ["-i", "pipe:0", "-frames:v", "1", "-vf", vf, "-f", "image2pipe", "-vcodec", "mjpeg", "-"],
        stdin=image,
    )


def test_a_picture_of_a_narrated_word_is_judged_on_topic_after_a_crop_and_a_keyframe() -> None:
    still = imagery.picture_png(imagery.depicted_word("Scene showing water vapor, 9:16"), 288, 512)
    footage = imagery.footage_mp4("planet", 360, 640, 1.0)
    zoomed = _jpeg(still, "crop=iw*0.8:ih*0.8:iw*0.1:ih*0.08,scale=288:512")
    score, reason = imagery.judge([zoomed, _jpeg(footage)], NARRATION)
    assert score == imagery.ON_TOPIC_SCORE, reason
    assert "water" in reason and "planet" in reason


def test_a_picture_of_another_word_is_judged_off_topic() -> None:
    score, reason = imagery.judge([_jpeg(imagery.picture_png("banana", 144, 256))], NARRATION)
    assert score == imagery.OFF_TOPIC_SCORE
    assert "nothing the narration" in reason


def test_the_words_of_a_niche_s_vocabulary_are_told_apart() -> None:
    words = imagery.subject_words(
        "webb telescope spots water vapor distant planet astronomers signs life banana slow "
        "cooker lentil soup apple unveils chip battery robot software phone security"
    )
    for i, a in enumerate(words):
        for b in words[i + 1 :]:
            gap = imagery._distance(imagery.colours_of(a), imagery.colours_of(b))
            assert gap > imagery.MATCH_DISTANCE * 1.5, (a, b)
