"""The `generated` visuals engine: a still from a Gemini image model, moved into the scene's clip.

The still comes from `generate_content` with response_modalities ["IMAGE"] and the asked aspect
ratio (Imagen's generate_images works only in Vertex mode), through the paid-call path
(gemini/paid.py): reserved against the dimension's budget at the model's price per image
before it is sent, settled on the images answered, and classed as every Gemini call is (429 and
5xx transient, a refused key or an unknown model permanent, with the fix naming the setting).

The still is kept in the media store before its call is recorded, and the ledger's stored
answer names it (URI and SHA-256): a rerun after a crash (the clip not made yet) finds the call
done and the still there, and pays nothing. A still the store lost since is asked again under a
work key of its own. Then still_motion moves it (a slow zoom or pan drawn from the scene hash)
into an H.264 clip at the media profile's clip size.

Errors are the paid path's: BudgetExhausted, PaidCallInFlight (a NotYet: a killed run's call may
still be answered), PaidCallTransient, PaidCallRefused, ModelBlocked, and PaidCallFailed for
answers that kept carrying no usable image.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdame_domain.generated_stills import (
    DEFAULT_ASPECT_RATIO,
    DEFAULT_IMAGE_MODEL,
    MODEL_FIELD,
    GeneratedSettings,
    still_prompt,
    still_size,
    still_work_key,
)
from mdame_domain.idempotency import idempotency_key
from mdame_domain.media_profile import media_profile
from mdame_domain.media_store import MediaProblem, MediaRegistry, MediaStore
from mdame_domain.model_output import InvalidModelOutput
from mdame_domain.still_motion import DEFAULT_FPS, animate_still, plan_motion
from mdame_resources.health import Health, HealthScope
from mdame_resources.providers.base import ProviderResource
from mdame_resources.providers.budget import CallContext

if TYPE_CHECKING:  # the SDK is imported with the first client (gemini.client.make_client)
    from google import genai
    from google.genai import types

DEFAULT_TIMEOUT_S = 120.0
# Billed answers without a usable image, per still, before it counts as failed.
DEFAULT_MAX_ATTEMPTS = 2


@dataclass(frozen=True)
class GeneratedStill:
    """A still in the media store, and what it cost now (0 when an earlier run paid)."""

    uri: str
    sha256: str
    mime: str
    width: int
    height: int
    model: str
    work_key: str
    spent_micros: int
    cached: bool


@dataclass(frozen=True)
class GeneratedClip:
    path: Path
    still: GeneratedStill
    motion: str  # the kind of motion (still_motion.KINDS)


def _image_parser(
    store: MediaStore, registry: MediaRegistry | None
) -> Callable[[types.GenerateContentResponse], dict[str, Any]]:
    def parse(response: types.GenerateContentResponse) -> dict[str, Any]:
        candidate = response.candidates[0] if response.candidates else None
        parts = candidate.content.parts if candidate and candidate.content else None
        blob = next(
            (
                p.inline_data
                for p in parts or []
                if p.inline_data is not None
                and str(p.inline_data.mime_type or "").startswith("image/")
                and p.inline_data.data
            ),
            None,
        )
        if blob is None or blob.data is None:
            finish = getattr(candidate.finish_reason, "value", "") if candidate else ""
            said = f" (finishReason {finish})" if finish and finish != "STOP" else ""
            raise InvalidModelOutput(f"the answer carries no image{said}")
        mime, width, height = still_size(blob.data)
        suffix = ".png" if mime == "image/png" else ".jpg"
        # Kept before the call is recorded: the ledger's answer names it, never holds it.
        with tempfile.TemporaryDirectory(prefix="mdame-still-") as folder:
            path = Path(folder) / f"still{suffix}"
            path.write_bytes(blob.data)
            stored = store.put_file(path, suffix, registry=registry)
        return {
            "uri": stored.uri,
            "sha256": stored.sha256,
            "mime": mime,
            "width": width,
            "height": height,
        }

    return parse


def generate_still(
    visual_prompt: str,
    *,
    ctx: CallContext,
    store: MediaStore,
    scene_key: str,
    settings: GeneratedSettings | None = None,
    candidate: int = 0,
    api_key: str = "",
    base_url: str | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    client: genai.Client | None = None,
) -> GeneratedStill:
    """A still of the scene's visual prompt, paid once per scene and candidate (see the module
    docstring), kept in `store`. `candidate` counts the stills the relevance gate asked for
    after rejecting one (each is a call of its own)."""
    from google.genai import types

    from mdame_resources.providers.gemini import PaidCaller, make_client

    chosen = settings or GeneratedSettings()
    price = chosen.price_micros  # an unpriced model is refused before anything is sent
    config = types.GenerateContentConfig(
        response_modalities=["IMAGE"],
        image_config=types.ImageConfig(aspect_ratio=chosen.aspect_ratio),
    )
    caller = PaidCaller(
        client or make_client(api_key, base_url, timeout_s), ctx, max_attempts=max_attempts
    )
    prompt = still_prompt(visual_prompt)
    parse = _image_parser(store, ctx.state)

    def ask(work_key: str) -> GeneratedStill | None:
        """The still of this work key, None when the store no longer has it."""
        result = caller.call(
            work_key=work_key,
            model=chosen.model,
            contents=prompt,
            config=config,
            parse=parse,
            model_field=MODEL_FIELD,
            per_image_micros=price,
        )
        value = result.value
        still = GeneratedStill(
            uri=str(value["uri"]),
            sha256=str(value["sha256"]),
            mime=str(value["mime"]),
            width=int(value["width"]),
            height=int(value["height"]),
            model=chosen.model,
            work_key=work_key,
            spent_micros=result.spent_micros,
            cached=result.cached,
        )
        return still if store.problem(still.uri, still.sha256) is None else None

    key = still_work_key(ctx.dimension.slug, scene_key, chosen, candidate)
    still = ask(key)
    if still is None:
        # An earlier run's still is gone from the store (housekeeping, another host's
        # folder): asked again, once, under a work key of its own.
        still = ask(idempotency_key(key, "again"))
    if still is None:
        raise MediaProblem(f"the still of {key} is not in the media store after it was stored")
    return still


class GeneratedVisuals(ProviderResource):
    """Scene clips from generated stills (see the module docstring). The model, its price per
    image and the aspect ratio are this resource's defaults; a dimension's own `generated:`
    settings, passed per call, take their place."""

    api_key: str
    base_url: str | None = None  # None: MDAME_GEMINI_BASE_URL, else Google's endpoint
    timeout_s: float = DEFAULT_TIMEOUT_S
    model: str = DEFAULT_IMAGE_MODEL
    usd_per_image: float | None = None  # None: the price list's (generated_stills)
    aspect_ratio: str = DEFAULT_ASPECT_RATIO
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    fps: int = DEFAULT_FPS

    def settings(self) -> GeneratedSettings:
        return GeneratedSettings(self.model, self.usd_per_image, self.aspect_ratio)

    def health_check(self, timeout: float, scope: HealthScope | None = None) -> list[Health]:
        """The key and models.get for each image model the active dimensions' chains use
        (this resource's model when none is active); an unpriced model FAILs too
        (visuals_health.py)."""
        from mdame_resources.providers.visuals_health import generated_health

        return generated_health(self, timeout, scope)

    def cache_key(self, settings: GeneratedSettings | None = None) -> str:
        # The model and the aspect ratio change the picture, the clip's size and rate the clip.
        profile = media_profile()
        chosen = settings or self.settings()
        size = f"{profile.clip_width}x{profile.clip_height}@{self.fps}"
        return f"generated:{chosen.key()}:{size}"

    def generate_clip(
        self,
        scene_hash: str,
        prompt: str,
        duration_s: float,
        out: Path,
        *,
        ctx: CallContext,
        store: MediaStore,
        candidate: int = 0,
        settings: GeneratedSettings | None = None,
        client: genai.Client | None = None,
    ) -> GeneratedClip:
        """Writes the scene's clip (H.264, no audio, the media profile's clip size) to `out`
        from a still of `prompt`, keyed by the scene hash and the candidate."""
        still = generate_still(
            prompt,
            ctx=ctx,
            store=store,
            scene_key=scene_hash,
            settings=settings or self.settings(),
            candidate=candidate,
            api_key=self.api_key,
            base_url=self.base_url,
            timeout_s=self.timeout_s,
            max_attempts=self.max_attempts,
            client=client,
        )
        profile = media_profile()
        motion = plan_motion(scene_hash, duration_s)
        animate_still(
            store.verified_path(still.uri, still.sha256),
            out,
            duration_s,
            scene_hash=scene_hash,
            width=profile.clip_width,
            height=profile.clip_height,
            fps=self.fps,
            motion=motion,
        )
        return GeneratedClip(Path(out), still, motion.kind)
