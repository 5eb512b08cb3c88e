"""What the visuals chain's fault tests share: a chain scene seeded as scene_plan queues it, the
chain's real providers pointed at the local Gemini, Pexels and Pixabay servers, the scene step
run until it converges, and the scene step as a child process of its own (to be SIGKILLed).

`python tests/faults/scene_chain_kit.py scene-step APP_URL MEDIA SCRATCH SCENE_ID` is that
child: one scene's scene_clip step body (make_scene_clip), its providers from the environment
(GEMINI_API_KEY, MDAME_GEMINI_BASE_URL, MDAME_PEXELS_*, MDAME_PIXABAY_*), as a worker runs it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # run as a script: this checkout's packages
    sys.path.insert(0, str(REPO))

from mdame_core.state import StateStore  # noqa: E402
from mdame_domain.idempotency import content_hash  # noqa: E402
from mdame_domain.media_store import MediaStore  # noqa: E402
from mdame_pipeline.clip_worker import SceneBusy, SceneOutcome, make_scene_clip  # noqa: E402
from mdame_pipeline.scene_cache import SCENE_JOB_TYPE, scene_chain, scene_job  # noqa: E402
from mdame_pipeline.scene_pictures import SceneEngines  # noqa: E402
from mdame_resources.providers.generated_visuals import GeneratedVisuals  # noqa: E402
from mdame_resources.providers.relevance import GeminiRelevanceJudge  # noqa: E402
from mdame_resources.providers.stock import StockFootage  # noqa: E402
from mdame_resources.providers.visuals import ProceduralVisuals  # noqa: E402

DIMENSION = "science"
KEY = f"2026-11-29|{DIMENSION}"
PALETTE = ["#1b5e20", "#aeea00", "#004d40"]


def chain_engines() -> SceneEngines:
    """The chain's providers as the fakes demo binds them: keys and endpoints from the
    environment (the MDAME_* variables a deployment sets)."""
    import os

    key = os.environ["GEMINI_API_KEY"]
    return SceneEngines(
        ProceduralVisuals(),
        GeneratedVisuals(api_key=key),
        StockFootage(),
        GeminiRelevanceJudge(api_key=key),
    )


@dataclass(frozen=True)
class ChainScene:
    scene: int
    job: int
    scene_hash: str


def seed_chain_scene(
    state: StateStore, name: str, engines: Sequence[str], subject: str = "telescope"
) -> ChainScene:
    """An approved script of DIMENSION with one queued scene whose job names a visuals chain of
    `engines`, its prompt and narration about `subject` (what the fakes draw and judge)."""
    from faultkit import rows, seed_script, seeding

    dimension_id = state.get_dimension(DIMENSION).id
    scene_hash = content_hash(f"chain-fault-{name}")
    narration = f"The {subject} shows us how far the light has travelled."
    spec = scene_chain(engines, DIMENSION, narration, [subject])
    prompt = f"A vertical shot showing a {subject} at night, soft cosmic gradients"
    with seeding(state, DIMENSION) as fenced:
        script = seed_script(fenced, dimension_id, name, "approved")
        scene = {
            "key": f"scene:{name}:0",
            "payload": {
                "script_id": script,
                "scene_index": 0,
                "scene_hash": scene_hash,
                "chain": spec,
            },
            "cached": None,
            "job": scene_job(scene_hash, prompt, PALETTE, None, spec),
        }
        assert fenced.plan_scenes(script, [scene], SCENE_JOB_TYPE, 3, KEY) == 1
    unit = state.get_work_unit("scene", f"scene:{name}:0")
    [(job,)] = rows(
        state.url, "SELECT id FROM mdame.jobs WHERE idempotency_key = %s", (unit.idempotency_key,)
    )
    return ChainScene(unit.id, job, scene_hash)


def converge(
    state: StateStore,
    scene_id: int,
    media: MediaStore,
    scratch: Path,
    engines: SceneEngines,
    timeout_s: float = 90.0,
) -> list[str]:
    """The scene step run again and again, as the hop sensor and the step's retries would run
    it (each after the wait the last one named), until the scene is made. Returns each run's
    outcome ("busy": the step was sent round again)."""
    outcomes: list[str] = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            outcome: SceneOutcome = make_scene_clip(
                state, scene_id, ProceduralVisuals(), media, scratch, engines
            )
        except SceneBusy as busy:
            outcomes.append("busy")
            time.sleep(min(busy.wait_s, 1.0))
            continue
        outcomes.append(outcome.outcome)
        if outcome.outcome in ("generated", "cache_hit", "done"):
            return outcomes
        assert outcome.outcome == "waiting", outcomes
        assert outcome.until is not None
        left = (datetime.fromisoformat(outcome.until) - datetime.now(UTC)).total_seconds()
        time.sleep(min(max(left, 0.05), 5.0))
    raise AssertionError(f"the scene was not made in {timeout_s}s: {outcomes}")


def start_scene_step(
    env: Mapping[str, str], app_url: str, media: Path, scratch: Path, scene_id: int, log: Path
) -> subprocess.Popen[bytes]:
    out = open(log, "wb")  # noqa: SIM115 - the child owns it
    try:
        return subprocess.Popen(
            [sys.executable, __file__, "scene-step", app_url, str(media), str(scratch),
             str(scene_id)],
            cwd=REPO,
            env={**env, "PYTHONPATH": str(REPO)},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    finally:
        out.close()


def _scene_step(app_url: str, media: str, scratch: str, scene_id: str) -> None:
    from mdame_domain.media_store import LocalMediaStore

    with StateStore(app_url, env="dev") as state:
        outcome = make_scene_clip(
            state,
            int(scene_id),
            ProceduralVisuals(),
            LocalMediaStore(Path(media)),
            Path(scratch),
            chain_engines(),
        )
    print(outcome.as_dict(), flush=True)


if __name__ == "__main__" and sys.argv[1:2] == ["scene-step"]:
    sys.path.insert(0, str(Path(__file__).parent))  # faultkit, as the tests import it
    _scene_step(*sys.argv[2:6])
