"""The relevance gate's judge: keyframes of a candidate clip and the scene's narration, sent to
a multimodal Gemini model through the paid-call path, answered as a score and a reason.

Keyframes are small JPEGs cut by ffmpeg (bit-exact, so the same clip gives the same request and
a rerun finds the judgement already made). The call is reserved against the dimension's budget
before it is sent and settled on the model's price (mdame_resources/providers/gemini/paid.py);
one work key per scene and clip, so a crash never pays for a judgement twice. Errors are the
paid path's: BudgetExhausted, PaidCallInFlight (a NotYet: a killed run's call may still be
answered), PaidCallTransient and PaidCallRefused propagate; a safety block and answers that
kept failing their checks come back as a judgement that does not pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdame_domain.media_store import sha256_file
from mdame_domain.mediatools import FFMPEG_BASE, MediaToolError, run_tool
from mdame_domain.probe import probe_media
from mdame_domain.relevance import (
    BLOCKED,
    IMAGE_TOKENS_ESTIMATE,
    MODEL_FIELD,
    RESPONSE_SCHEMA,
    SYSTEM_INSTRUCTION,
    UNUSABLE,
    Judgement,
    RelevanceSettings,
    judgement_work_key,
    keyframe_times,
    parse_judgement,
    relevance_request,
)
from mdame_resources.health import Health, HealthScope
from mdame_resources.providers.base import ProviderResource
from mdame_resources.providers.budget import CallContext

if TYPE_CHECKING:  # the SDK is imported with the first client (gemini.client.make_client)
    from google import genai

KEYFRAME_MIME = "image/jpeg"
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_KEYFRAME_TIMEOUT_S = 60.0
# Billed answers that failed their checks, per candidate, before it counts as unusable.
DEFAULT_MAX_ATTEMPTS = 3


def keyframes(
    clip: str | Path,
    *,
    count: int,
    height: int,
    timeout_s: float = DEFAULT_KEYFRAME_TIMEOUT_S,
    duration_s: float | None = None,
) -> list[bytes]:
    """`count` JPEG frames of `height` px at keyframe_times of the clip's duration (probed
    when not given). Bit-exact output: the same clip always gives the same bytes."""
    duration = duration_s if duration_s is not None else probe_media(str(clip)).duration_s
    frames = []
    for at in keyframe_times(duration, count):
        args = [
            *FFMPEG_BASE, "-loglevel", "error", "-ss", f"{at:.3f}", "-i", str(clip),
            "-frames:v", "1", "-vf", f"scale=-2:{height}", "-q:v", "4", "-map_metadata", "-1",
            "-fflags", "+bitexact", "-flags:v", "+bitexact",
            "-f", "image2pipe", "-vcodec", "mjpeg", "pipe:1",
        ]  # fmt: skip
        data = run_tool(args, timeout=timeout_s).stdout
        if not data:
            raise MediaToolError("ffmpeg", f"frame at {at}s of {clip}", "", "returned no frame")
        frames.append(data)
    return frames


def judge_clip(
    clip: str | Path,
    narration: str,
    *,
    scene_key: str,
    ctx: CallContext,
    api_key: str,
    settings: RelevanceSettings | None = None,
    clip_sha256: str | None = None,
    duration_s: float | None = None,
    base_url: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    keyframe_timeout_s: float = DEFAULT_KEYFRAME_TIMEOUT_S,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    client: genai.Client | None = None,
) -> Judgement:
    """Whether `clip` shows what `narration` says, judged by settings.model against
    settings.threshold. `scene_key` names the scene (with the clip's SHA-256 it makes the work
    key); `clip_sha256` and `duration_s` spare a read and a probe when the caller knows them."""
    from mdame_resources.providers.gemini import (
        ModelBlocked,
        PaidCaller,
        PaidCallFailed,
        PaidCallRefused,
        PaidCallTransient,
        json_config,
        make_client,
        response_json,
    )

    settings = settings or RelevanceSettings()
    frames = keyframes(
        clip,
        count=settings.keyframes,
        height=settings.keyframe_height,
        timeout_s=keyframe_timeout_s,
        duration_s=duration_s,
    )
    digest = clip_sha256 or sha256_file(clip)
    model, threshold = settings.model, settings.threshold

    def parse(response: Any) -> dict[str, Any]:
        judgement = parse_judgement(response_json(response), threshold, model)
        return {"score": judgement.score, "reason": judgement.reason}  # what the ledger keeps

    caller = PaidCaller(
        client or make_client(api_key, base_url, timeout_s), ctx, max_attempts=max_attempts
    )
    try:
        result = caller.call(
            work_key=judgement_work_key(ctx.dimension.slug, scene_key, digest, model),
            model=model,
            contents=relevance_request(narration),
            config=json_config(
                SYSTEM_INSTRUCTION, RESPONSE_SCHEMA, settings.max_output_tokens, 0.0
            ),
            parse=parse,
            media=[(frame, KEYFRAME_MIME) for frame in frames],
            media_tokens=IMAGE_TOKENS_ESTIMATE * len(frames),
            model_field=MODEL_FIELD,
        )
    except (PaidCallTransient, PaidCallRefused):
        raise
    except ModelBlocked as exc:
        return Judgement(0.0, str(exc)[:300], threshold, BLOCKED, model)
    except PaidCallFailed as exc:
        return Judgement(0.0, str(exc)[:300], threshold, UNUSABLE, model)
    # A stored answer (an earlier run's) is judged again against today's threshold.
    return parse_judgement(result.value, threshold, model)


class GeminiRelevanceJudge(ProviderResource):
    """The relevance gate's judge (see judge_clip); the key as dg.EnvVar("GEMINI_API_KEY"),
    the endpoint from base_url, else MDAME_GEMINI_BASE_URL, else Google's."""

    api_key: str
    base_url: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S
    keyframe_timeout_s: float = DEFAULT_KEYFRAME_TIMEOUT_S
    max_attempts: int = DEFAULT_MAX_ATTEMPTS

    def health_check(self, timeout: float, scope: HealthScope | None = None) -> list[Health]:
        """The key and models.get for each judge model of the active dimensions whose chain
        has a judged engine (visuals_health.py)."""
        from mdame_resources.providers.visuals_health import relevance_health

        return relevance_health(self, timeout, scope)

    def judge(
        self,
        clip: str | Path,
        narration: str,
        *,
        scene_key: str,
        ctx: CallContext,
        settings: RelevanceSettings | None = None,
        clip_sha256: str | None = None,
        duration_s: float | None = None,
    ) -> Judgement:
        return judge_clip(
            clip,
            narration,
            scene_key=scene_key,
            ctx=ctx,
            api_key=self.api_key,
            settings=settings,
            clip_sha256=clip_sha256,
            duration_s=duration_s,
            base_url=self.base_url,
            timeout_s=self.timeout_s,
            keyframe_timeout_s=self.keyframe_timeout_s,
            max_attempts=self.max_attempts,
        )
