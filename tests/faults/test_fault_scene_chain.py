"""The visuals chain's paid and rate-limited calls under crashes and long outages, one scene at a
time against the local Gemini, Pexels and Pixabay servers (fakes/), with the real providers,
scene step, state store and budget ledger.

Kills: the scene step's process is SIGKILLed while (a) the image model's request, (b) a stock
download or (c) a relevance judgement is in flight (the server holds it); the held Gemini request
is then answered and billed, as Google bills an answer whose caller died. The scene step run
again (as the step's retries and the hop sensor run it) makes the scene, and the budget ledger
equals what Gemini billed: no work key paid twice, the killed call settled at its estimate.

Waits: a Pexels 429 burst and an outage of the image model each outlast a run of the step; that
run ends with the scene waiting (its job deferred to a time, its attempt given back; not failed,
no alert), and the runs after the wait make it, with no operator action.

The servers are started once for the module; each case has a database of its own."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from faultkit import rows, wait_for
from scene_chain_kit import (
    chain_engines,
    converge,
    seed_chain_scene,
    start_scene_step,
)

from fakes import gemini, pexels, pixabay
from fakes.stock_common import environ_for
from mdame_core.state import StateStore
from mdame_domain.media_store import LocalMediaStore
from mdame_pipeline.clip_worker import make_scene_clip
from mdame_resources.providers.visuals import ProceduralVisuals
from tests.chaos.provider_ledgers import budget_against_gemini
from tests.childenv import child_environ

GEMINI_KEY, PEXELS_KEY, PIXABAY_KEY = "chain-fault-gemini", "chain-fault-pexels", "chain-px"
# Every wait of the product shortened through its setting: a run after a kill takes over the
# dead holder's job lease, visuals lock and paid call within seconds.
SETTINGS = {
    "MDAME_JOB_LEASE_S": "2",
    "MDAME_LOCK_TTL_S": "2",
    "MDAME_GEMINI_GRACE_S": "1",
    "MDAME_GEMINI_BACKOFF_S": "0.05",
    "MDAME_GEMINI_BACKOFF_MAX_S": "0.2",
    "MDAME_SCENE_RETRY_S": "2",
    "MDAME_STOCK_RATE_WAIT_S": "2",
    "MDAME_STOCK_BACKOFF_S": "0.05",
}
HOLD_S = 120.0  # a held request's longest wait: the test releases it long before


class Servers:
    def __init__(self, model: gemini.FakeGemini, px: Any, pb: Any) -> None:
        self.model, self.pexels, self.pixabay = model, px, pb

    def env(self) -> dict[str, str]:
        return {
            "GEMINI_API_KEY": GEMINI_KEY,
            "MDAME_GEMINI_BASE_URL": self.model.base_url,
            "MDAME_PEXELS_API_KEY": PEXELS_KEY,
            "MDAME_PIXABAY_API_KEY": PIXABAY_KEY,
            **environ_for(self.pexels, self.pixabay),
            **SETTINGS,
        }

    def reset(self) -> None:
        self.model.clear_faults()
        with self.model.lock:
            self.model.requests.clear()
        for stock in (self.pexels, self.pixabay):
            stock.clear_faults()


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    folder = tmp_path_factory.mktemp("chain-fakes")
    with (
        gemini.running() as model,
        pexels.running(folder / "pexels") as px,
        pixabay.running(folder / "pixabay") as pb,
    ):
        px.keys, pb.keys = {PEXELS_KEY}, {PIXABAY_KEY}
        yield Servers(model, px, pb)


class Case:
    def __init__(self, servers: Servers, db: Any, home: Path, env: dict[str, str]) -> None:
        self.servers, self.db, self.home, self.env = servers, db, home, env
        self.state = StateStore(db.app, env="dev")
        self.media = LocalMediaStore(home / "media")
        self.scratch = home / "scratch"
        self.scratch.mkdir(parents=True)
        self.since = datetime.now(UTC)

    def step(self, scene_id: int) -> Any:
        return make_scene_clip(
            self.state, scene_id, ProceduralVisuals(), self.media, self.scratch, chain_engines()
        )

    def converge(self, scene_id: int) -> list[str]:
        return converge(self.state, scene_id, self.media, self.scratch, chain_engines())

    def ledger(self, killed: bool) -> list[str]:
        counters = self.servers.model.counters()
        return budget_against_gemini(self.db.app, counters, killed=killed, since=self.since)

    def ready(self, scene_id: int) -> dict[str, Any]:
        scene = self.state.get_work_unit("scene", scene_id)
        assert scene.state == "ready", (scene.state, scene.result)
        clip = self.media.path_for(scene.result["uri"])
        assert clip.is_file()
        return dict(scene.result)

    def alerts(self) -> list[tuple[Any, ...]]:
        return rows(self.db.owner, "SELECT cause, text FROM mdame.alerts")


@pytest.fixture
def case(servers: Servers, fresh_synced, tmp_path: Path, monkeypatch) -> Iterator[Case]:
    servers.reset()
    home = tmp_path / "home"
    env = {**servers.env(), "MDAME_HOME": str(home), "ENV": "dev"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    made = Case(servers, fresh_synced, home, env)
    try:
        yield made
    finally:
        servers.reset()
        made.state.close()


# ------------------------------------------------------------------------------------------
# Kills while a call is in flight
# ------------------------------------------------------------------------------------------
def _stock_download_in_flight(servers: Servers) -> bool:
    return any(
        r["kind"] == "file" and r["status"] == 0
        for stock in (servers.pexels, servers.pixabay)
        for r in stock.requests()
    )


KILL_POINTS = {
    # point: (the chain's engines, how the call is held, when it is in flight)
    "image": (["generated"], lambda s: s.model.faults.push("hold", on="image", hang_s=HOLD_S)),
    "download": (
        ["stock"],
        lambda s: s.pexels.faults.push("slow", on="file", seconds=HOLD_S),
    ),
    "judge": (["generated"], lambda s: s.model.faults.push("hold", on="judge", hang_s=HOLD_S)),
}


@pytest.mark.parametrize("point", sorted(KILL_POINTS))
def test_a_kill_with_a_call_in_flight_converges_and_nothing_is_paid_twice(
    case: Case, point: str, tmp_path: Path
) -> None:
    engines, hold = KILL_POINTS[point]
    seeded = seed_chain_scene(case.state, f"kill-{point}", engines)
    hold(case.servers)
    env = child_environ()
    env.update(case.env)
    child = start_scene_step(
        env, case.db.app, case.home / "media", case.scratch, seeded.scene, tmp_path / "step.log"
    )
    try:
        if point == "download":
            wait_for("a stock download in flight", lambda: _stock_download_in_flight(case.servers))
        else:
            wait_for(f"the {point} request held", lambda: case.servers.model.held() > 0, 120)
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
    # The held request is answered (to nobody) and billed, as Google bills it.
    case.servers.model.release_held()
    wait_for(
        "the held request answered",
        lambda: all(r.status for r in case.servers.model.requests),
    )

    outcomes = case.converge(seeded.scene)

    result = case.ready(seeded.scene)
    assert result["engine"] == engines[0] and result["relevance"]["score"] >= 0.6
    job = case.state.get_job(seeded.job)
    assert job.state == "succeeded"
    assert "failed" not in outcomes and case.alerts() == []
    # The ledger equals what Gemini billed: the killed call settled at its estimate (its
    # answer is lost with the process), every other at its usage, no work key paid twice.
    assert case.ledger(killed=True) == []
    counters = case.servers.model.counters()
    estimated = rows(
        case.db.app,
        """SELECT count(*) FROM mdame.provider_attempts
            WHERE provider LIKE 'gemini:%%' AND detail ? 'settled_at_estimate'""",
    )[0][0]
    billed = len(counters["billed"])
    settled = rows(
        case.db.app,
        """SELECT count(*) FROM mdame.provider_attempts
            WHERE provider LIKE 'gemini:%%' AND status IN ('succeeded', 'failed')
              AND detail ? 'usage'""",
    )[0][0]
    assert billed == settled + estimated  # each billed answer is in the ledger once
    if point == "download":
        assert estimated == 0  # nothing paid was in flight
    else:
        assert estimated == 1


# ------------------------------------------------------------------------------------------
# Waits that outlast a run
# ------------------------------------------------------------------------------------------
def _deferred(case: Case, job_id: int) -> tuple[str, int, datetime]:
    [(state, attempt, run_after)] = rows(
        case.db.app, "SELECT state, attempt, run_after FROM mdame.jobs WHERE id = %s", (job_id,)
    )
    return state, attempt, run_after


def test_a_pexels_429_burst_longer_than_a_run_leaves_the_scene_waiting_then_made(
    case: Case, monkeypatch
) -> None:
    monkeypatch.delenv("MDAME_PIXABAY_API_KEY")  # Pexels alone: nothing else to try meanwhile
    seeded = seed_chain_scene(case.state, "pexels-429", ["stock"])
    for _ in range(2):  # two runs' searches meet it
        case.servers.pexels.faults.push("rate_limited", reset=2)

    first = case.step(seeded.scene)

    assert first.outcome == "waiting" and first.until is not None
    state, attempt, run_after = _deferred(case, seeded.job)
    assert (state, attempt) == ("queued", 0)  # deferred, its attempt given back
    assert run_after > datetime.now(UTC)
    assert case.state.get_work_unit("scene", seeded.scene).state != "failed"
    assert case.alerts() == []

    outcomes = case.converge(seeded.scene)

    assert outcomes[-1] == "generated" and "failed" not in outcomes
    assert case.ready(seeded.scene)["engine"] == "stock"
    assert case.servers.pexels.counters()["by_status"].get("429") == 2
    assert case.alerts() == [] and case.ledger(killed=False) == []


def test_an_image_model_outage_longer_than_a_run_leaves_the_scene_waiting_then_made(
    case: Case,
) -> None:
    seeded = seed_chain_scene(case.state, "image-outage", ["generated"])
    case.servers.model.outage, case.servers.model.outage_on = 503, "image"

    first = case.step(seeded.scene)

    assert first.outcome == "waiting" and first.until is not None
    state, attempt, run_after = _deferred(case, seeded.job)
    assert (state, attempt) == ("queued", 0)
    assert run_after > datetime.now(UTC)
    assert case.alerts() == []
    case.servers.model.clear_faults()  # the outage ends

    outcomes = case.converge(seeded.scene)

    assert outcomes[-1] == "generated" and "failed" not in outcomes
    assert case.ready(seeded.scene)["engine"] == "generated"
    counters = case.servers.model.counters()
    assert counters["by_status"].get("503", 0) > 0 and counters["images"] == 1
    # The refused attempts released their reservations; the one still is billed once.
    assert case.alerts() == [] and case.ledger(killed=False) == []
