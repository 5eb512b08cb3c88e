"""trends, gemini, safety, generated, diffusers, relevance, stock, edge_tts, youtube, tiktok,
instagram, telegram: each production provider's own health check, on the provider as the runs
build it (mdame_assets.resources.shared_resources, the function the definitions bind), so the
doctor reads no provider setting of its own.

    trends    the trend reader: one uncached fetch of each source the active dimensions list
    gemini    the writer: models.get per model the active dimensions configure
    safety    the safety classifier: models.get per text model; one the writer's check asked
              with the same key at the same endpoint is not asked again (Doctor.answers)
    generated the generated visuals engine: models.get per image model the active dimensions'
              chains use, and its price per image
    diffusers the diffusers engine: the model folders of the chains that have it (no call)
    relevance the relevance judge: models.get per judge model
    stock     the stock engine: one small search per source with a key (Pexels, Pixabay)
    edge_tts  the voice chain: the Edge-TTS voices list, the dimensions' voices on it
    youtube   the YouTube publisher: per active account, its grant opened, the token refreshed,
              channels.list(mine=True)
    tiktok    the TikTok publisher: the app's key and secret, then per active account its
              grant opened, the token refreshed, creator_info and one video list entry
    instagram the Instagram publisher: per active account, its token opened, `me` and the
              account's content_publishing_limit
    telegram  the notifier: getMe, and a chat for every active dimension

With the offline providers (or an unknown set) each SKIPs, saying why.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from mdame_cli.doctor.context import Doctor
from mdame_domain.doctor import Status

if TYPE_CHECKING:
    from mdame_core.state import StateStore
    from mdame_resources.health import Health, HealthScope


def _resources(doctor: Doctor) -> dict[str, Any]:
    """The resources the runs bind, built once per doctor run."""
    if doctor.resources is None:
        from mdame_assets.resources import shared_resources

        doctor.resources = shared_resources()
    return doctor.resources


def _provider(doctor: Doctor, key: str) -> Any:
    """The provider the runs bind under `key`."""
    return _resources(doctor)[key]


def _scope(doctor: Doctor, state: Any = None) -> HealthScope:
    from mdame_resources.health import HealthScope

    slugs = [row.slug for row in doctor.dimension_rows]
    lock = pipeline_lock(state) if state is not None else None
    return HealthScope(
        dimensions=doctor.dimensions, slugs=slugs, state=state, lock=lock, answers=doctor.answers
    )


def pipeline_lock(state: StateStore) -> Callable[[str], AbstractContextManager[StateStore | None]]:
    """HealthScope.lock for `state`: a dimension's pipeline lock held for the block (renewed
    as a run's is), yielding the fenced store, or None while a run holds it."""

    @contextlib.contextmanager
    def held(slug: str) -> Iterator[StateStore | None]:
        from mdame_pipeline.locks import LockBusy, held_lock

        with contextlib.ExitStack() as stack:
            try:
                fenced: StateStore | None = stack.enter_context(
                    held_lock(state, slug, "mdame doctor")
                )
            except LockBusy:
                fenced = None
            yield fenced

    return held


def _report(doctor: Doctor, group: str, findings: Sequence[Health]) -> None:
    """One row per finding: `group`, or `group:subject` for a finding about one thing."""
    for found in findings:
        name = f"{group}:{found.subject}" if found.subject else group
        doctor.add(name, found.status, found.message)


def _provider_skip(doctor: Doctor, group: str) -> bool:
    """SKIPs a provider check when the offline providers are in use (or unknown)."""
    if doctor.providers is None:
        doctor.add(group, Status.SKIP, "ENV is not valid, so the provider set is unknown")
        return True
    if doctor.providers == "offline":
        doctor.add(
            group,
            Status.SKIP,
            "offline providers (MDAME_PROVIDERS=offline, ENV=dev's default): not called",
        )
        return True
    return False


def _own_check(doctor: Doctor, group: str, key: str) -> None:
    """The check of the provider bound under `key`; SKIPs one that has none of its own (the
    procedural stand-in the fakes bind for the diffusers engine), saying why."""
    if _provider_skip(doctor, group):
        return
    resource = _provider(doctor, key)
    from mdame_resources.providers.base import ProviderResource

    if type(resource).health_check is ProviderResource.health_check:
        why = resource.no_health_check or "it has no health check"
        doctor.add(
            group,
            Status.SKIP,
            f"the {doctor.providers} providers bind {type(resource).__name__} for {key} ({why})",
        )
        return
    _report(doctor, group, resource.health_check(doctor.options.timeout_s, _scope(doctor)))


def check_trends(doctor: Doctor) -> None:
    _own_check(doctor, "trends", "trend_source")


def check_safety(doctor: Doctor) -> None:
    _own_check(doctor, "safety", "safety")


def check_diffusers(doctor: Doctor) -> None:
    _own_check(doctor, "diffusers", "visuals")


def check_gemini(doctor: Doctor) -> None:
    """models.get per configured model: one row each (`gemini:<model>`); a problem of the
    whole service (no key, a refused key, nothing listening) is one `gemini` row."""
    if _provider_skip(doctor, "gemini"):
        return
    writer = _provider(doctor, "writer")
    _report(doctor, "gemini", writer.health_check(doctor.options.timeout_s, _scope(doctor)))


def _visuals_check(doctor: Doctor, group: str, key: str) -> None:
    """A visuals chain resource's check; SKIPs when the provider set binds no `key` (a
    deployment whose definitions do not run that engine)."""
    if _provider_skip(doctor, group):
        return
    resource = _resources(doctor).get(key)
    if resource is None:
        doctor.add(group, Status.SKIP, f"the {doctor.providers} providers bind no {key}")
        return
    _report(doctor, group, resource.health_check(doctor.options.timeout_s, _scope(doctor)))


def check_generated(doctor: Doctor) -> None:
    _visuals_check(doctor, "generated", "generated_visuals")


def check_relevance(doctor: Doctor) -> None:
    _visuals_check(doctor, "relevance", "relevance_judge")


def check_stock(doctor: Doctor) -> None:
    _visuals_check(doctor, "stock", "stock_footage")


def check_edge_tts(doctor: Doctor) -> None:
    if _provider_skip(doctor, "edge_tts"):
        return
    voice = _provider(doctor, "voice")
    _report(doctor, "edge_tts", voice.health_check(doctor.options.timeout_s, _scope(doctor)))


def _publisher_check(doctor: Doctor, group: str, key: str) -> None:
    """A publisher's check of its platform's accounts, read through a state store."""
    if _provider_skip(doctor, group):
        return
    if not doctor.db_ok:
        doctor.add(group, Status.SKIP, "the database is not ready, so the accounts are unknown")
        return
    if not doctor.dimension_rows:
        doctor.add(
            group,
            Status.WARN,
            "no active dimension in the database yet (the registry syncs on the first run: "
            "`make demo` or the daemon): no account to check",
        )
        return
    from mdame_core.state import StateStore

    publisher = _provider(doctor, key)
    timeout = doctor.options.timeout_s
    with StateStore(env=doctor.env, pool_max=1, connect_timeout_s=timeout) as st:
        _report(doctor, group, publisher.health_check(timeout, _scope(doctor, st)))


def check_youtube(doctor: Doctor) -> None:
    _publisher_check(doctor, "youtube", "youtube_publisher")


def check_tiktok(doctor: Doctor) -> None:
    _publisher_check(doctor, "tiktok", "tiktok_publisher")


def check_instagram(doctor: Doctor) -> None:
    _publisher_check(doctor, "instagram", "instagram_publisher")


def check_telegram(doctor: Doctor) -> None:
    """getMe through the alerts' own client (mdame_resources.notify.TelegramNotifier), then
    a chat for every active dimension and for global alerts."""
    if _provider_skip(doctor, "telegram"):
        return
    notifier = _provider(doctor, "notifier")
    _report(doctor, "telegram", notifier.health_check(doctor.options.timeout_s, _scope(doctor)))
