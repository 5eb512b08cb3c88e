"""What must hold after any crash and rerun: the invariants the crash harness checks.

`snapshot` reads a finished partition's end state (database rows and files); `violations` lists
every broken invariant, each as one line naming the row or file. Both only read: SELECTs as the
application role, and files under MDAME_HOME and the media root.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from mdame_domain.media_store import LocalMediaStore, sha256_file
from mdame_domain.outbox import list_outbox
from mdame_domain.video_metadata import publication_marker
from tests.chaos.channel import Channel, ChannelView
from tests.chaos.provider_ledgers import killed_call_excesses

# A list call's quota key: the publication's key, then ":units:" and a one-off suffix
# (YouTubePublisher._metered). How many list calls a run makes depends on where it was killed.
UNITS_KEY = ":units:"
# The insert of an initiation YouTube may have counted for an attempt that did not publish: the
# publication's key, then ":initiation:" and the attempt's id (0027). How many there are depends
# on where a run was killed.
INITIATION_KEY = ":initiation:"


@dataclass(frozen=True)
class EndState:
    """The comparable end state of one partition: keys, states and content hashes."""

    units: Mapping[str, Mapping[str, str]]  # kind -> idempotency key -> state
    jobs: Mapping[str, str]  # job idempotency key -> state
    video_ids: Mapping[str, str]  # publication key -> video id
    quota: Mapping[str, str]  # quota key -> ledger state
    hashes: Mapping[str, str] = field(default_factory=dict)  # "voice:<key>" ... -> sha256

    def differences(self, clean: EndState) -> list[str]:
        """How this end state differs from the clean run's (empty when equal)."""
        found: list[str] = []
        for kind in sorted(set(self.units) | set(clean.units)):
            found += _diff(kind, self.units.get(kind, {}), clean.units.get(kind, {}))
        found += _diff("job", self.jobs, clean.jobs)
        found += _diff("video id", self.video_ids, clean.video_ids)
        found += _diff("quota", self.quota, clean.quota)
        found += _diff("content hash", self.hashes, clean.hashes)
        return found


def _diff(label: str, got: Mapping[str, str], want: Mapping[str, str]) -> list[str]:
    out = []
    for key in sorted(set(got) | set(want)):
        if got.get(key) != want.get(key):
            out.append(
                f"end state: {label} {_short(key)} is {got.get(key, 'absent')}, "
                f"clean run has {want.get(key, 'absent')}"
            )
    return out


def _short(key: str) -> str:
    return key if len(key) <= 24 else f"{key[:20]}..."


# ------------------------------------------------------------------------------------------
# Reading
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Unit:
    kind: str
    id: int
    key: str
    state: str
    terminal: bool
    payload: dict[str, Any]
    result: dict[str, Any]


def _rows(conn: psycopg.Connection, query: str, args: Iterable[Any] = ()) -> list[tuple]:
    return conn.execute(query, list(args)).fetchall()


def _units(conn: psycopg.Connection) -> list[Unit]:
    units = []
    for kind, table in _rows(conn, "SELECT kind, table_name FROM mdame.work_kinds ORDER BY kind"):
        rows = _rows(
            conn,
            f"""SELECT u.id, u.idempotency_key, u.state, s.is_terminal, u.payload, u.result
                  FROM mdame."{table}" u
                  JOIN mdame.work_states s ON s.kind = u.kind AND s.state = u.state
                 ORDER BY u.id""",
        )
        units += [Unit(kind, *row) for row in rows]
    return units


def _file_hashes(units: list[Unit], media: LocalMediaStore, home: Path) -> dict[str, str]:
    """Content hashes the pipeline recorded, checked against the bytes actually stored."""
    hashes = {}
    for unit in units:
        if unit.kind in ("voice_track", "render"):
            uri, sha = unit.payload.get("uri"), unit.payload.get("sha256")
        elif unit.kind == "scene":
            uri, sha = unit.result.get("uri"), unit.result.get("sha256")
        else:
            continue
        if uri and sha:
            path = media.path_for(uri)
            hashes[f"{unit.kind}:{unit.key}"] = sha256_file(path) if path.exists() else "missing"
    # The channel names its videos (per session, so per run): an entry is keyed by the
    # publication that names its id.
    publication_of = {
        str(u.result["video_id"]): u.key
        for u in units
        if u.kind == "publication" and u.result.get("video_id")
    }
    for entry in list_outbox(home / "outbox"):
        for path in (entry.video_path, entry.metadata_path):
            owner = publication_of.get(entry.video_id, entry.video_id)
            rel = f"{entry.folder.parent.name}/{owner}/{path.name}"
            digest = sha256_file(path) if path.exists() else "missing"
            if path == entry.metadata_path and path.exists():
                digest = _metadata_digest(path)
            hashes[f"outbox:{rel}"] = digest
    return hashes


def _metadata_digest(path: Path) -> str:
    """metadata.json's digest without `published_at`, the wall-clock moment of publishing
    (it differs between the clean run and a crash case; it must be a past UTC time), and
    without the id the channel gave the video (compared through its publication)."""
    document = json.loads(path.read_text(encoding="utf-8"))
    document.pop("video_id", None)
    raw = document.pop("published_at", None)
    published = datetime.fromisoformat(raw) if isinstance(raw, str) else None
    if published is None or published.tzinfo is None or published > datetime.now(UTC):
        return f"published_at {raw!r} is not a past UTC time"
    canonical = json.dumps(document, sort_keys=True).encode()
    return hashlib.sha256(canonical).hexdigest()


def snapshot(app_url: str, home: Path, media_root: Path) -> EndState:
    """Video ids are the channel's (per upload session, so per run): only whether a publication
    has one is compared; list calls' and spent initiations' quota entries (their number depends on
    where a run was killed) are left to the ledgers' balance and, with a fake channel, to
    `_channel`."""
    with psycopg.connect(app_url, autocommit=True) as conn:
        units = _units(conn)
        jobs = dict(_rows(conn, "SELECT idempotency_key, state FROM mdame.jobs"))
        quota = {
            key: state
            for key, state in _rows(conn, "SELECT quota_key, state FROM mdame.quota_ledger")
            if UNITS_KEY not in key and INITIATION_KEY not in key
        }
    by_kind: dict[str, dict[str, str]] = {}
    for unit in units:
        by_kind.setdefault(unit.kind, {})[unit.key] = unit.state
    video_ids = {
        u.key: "a channel video" if u.result.get("video_id") else "none"
        for u in units
        if u.kind == "publication"
    }
    hashes = _file_hashes(units, LocalMediaStore(media_root), home)
    return EndState(by_kind, jobs, video_ids, quota, hashes)


# ------------------------------------------------------------------------------------------
# The invariants
# ------------------------------------------------------------------------------------------
def violations(
    app_url: str,
    home: Path,
    media_root: Path,
    clean: EndState | None = None,
    channel: Channel | None = None,
) -> list[str]:
    """Every broken invariant after a run (or a crash and its reruns) has finished.

    With `clean` (the clean run's end state), non-terminal units and queued jobs are legitimate
    only where the clean run leaves them too, and the end state must equal it. With `channel`
    (the publisher mode), the videos are on that fake YouTube channel instead of the outbox.
    """
    with psycopg.connect(app_url, autocommit=True) as conn:
        units = _units(conn)
        found = [
            *_publications(conn, units, home, outbox=channel is None),
            *(_channel(conn, units, channel) if channel else []),
            *_unfinished(conn, units, clean),
            *_ledgers(conn),
            *_attempts(conn),
            *_events(conn, units),
            *_locks(conn),
        ]
    if clean is not None:
        found += snapshot(app_url, home, media_root).differences(clean)
    return found


def _publications(
    conn: psycopg.Connection, units: list[Unit], home: Path, outbox: bool = True
) -> list[str]:
    """One publication per script and account; one outbox entry per published publication."""
    found = []
    for script_id, account_id, n in _rows(
        conn,
        """SELECT script_id, account_id, count(*) FROM mdame.publications
            GROUP BY 1, 2 HAVING count(*) > 1""",
    ):
        found.append(f"duplicate publication: script {script_id} account {account_id} x{n}")
    accounts = dict(
        _rows(
            conn,
            """SELECT dimension_id, count(*) FROM mdame.dimension_accounts
                WHERE active GROUP BY 1""",
        )
    )
    pubs = [u for u in units if u.kind == "publication"]
    for script in (u for u in units if u.kind == "script" and u.state == "published"):
        mine = [p for p in pubs if p.payload["script_id"] == script.id]
        published = [p for p in mine if p.state == "published"]
        wanted = accounts.get(script.payload["dimension_id"], 0)
        if len(published) != wanted or len(mine) != wanted:
            found.append(
                f"script {script.id} is published with {len(published)} published of "
                f"{len(mine)} publications, expected {wanted} (one per account)"
            )
    if not outbox:
        return found
    expected = {str(p.result.get("video_id")) for p in pubs if p.state == "published"}
    entries = [e.video_id for e in list_outbox(home / "outbox")]
    for video_id in sorted(set(entries) - expected):
        found.append(f"outbox entry {video_id} belongs to no published publication")
    for video_id in sorted(expected - set(entries)):
        found.append(f"published video {video_id} has no outbox entry")
    if len(entries) != len(set(entries)):
        found.append(f"outbox holds the same video id twice: {sorted(entries)}")
    outbox = home / "outbox"
    stray = sorted(str(p.relative_to(outbox)) for p in outbox.glob("*/.tmp-*"))
    if stray:
        found.append(f"half-written outbox entries left behind: {stray}")
    return found + _published_bytes(conn, home)


def _published_bytes(conn: psycopg.Connection, home: Path) -> list[str]:
    """The bytes published are the bytes approved: each publication names its render's SHA-256
    (publications.content_sha256), and the channel holds exactly those bytes."""
    found = []
    videos = {e.video_id: e.video_path for e in list_outbox(home / "outbox")}
    for pub_id, state, sha, render_sha, video_id in _rows(
        conn,
        """SELECT p.id, p.state, p.content_sha256, r.payload->>'sha256', p.result->>'video_id'
             FROM mdame.publications p JOIN mdame.renders r ON r.id = p.render_id
            ORDER BY p.id""",
    ):
        if sha is None or sha != render_sha:
            found.append(
                f"publication {pub_id} names content {_short(str(sha))}, its render is "
                f"{_short(str(render_sha))}"
            )
        path = videos.get(str(video_id))
        published = state == "published" and path is not None and path.exists()
        if published and sha256_file(path) != sha:
            found.append(f"publication {pub_id}: the channel's video {video_id} is other bytes")
    return found


def _channel(conn: psycopg.Connection, units: list[Unit], channel: Channel) -> list[str]:
    """The publisher mode's channel: exactly one video per (script, account), found by the
    publication's marker, with the approved render's bytes; and each account's quota ledger
    (committed, per bucket, all days) equal to the channel's own counters."""
    found = []
    view = channel.view()
    accounts = dict(_rows(conn, "SELECT id, handle FROM mdame.dimension_accounts"))
    claimed: set[int] = set()
    for pub_id, key, state, account_id, sha, render_sha, video_id in _rows(
        conn,
        """SELECT p.id, p.idempotency_key, p.state, p.account_id, p.content_sha256,
                  r.payload->>'sha256', p.result->>'video_id'
             FROM mdame.publications p JOIN mdame.renders r ON r.id = p.render_id
            ORDER BY p.id""",
    ):
        marker = publication_marker(key)
        videos = [
            (i, v)
            for i, v in enumerate(view.videos)
            if v.handle == accounts[account_id] and marker in v.text
        ]
        claimed |= {i for i, _ in videos}
        name = f"publication {pub_id} ({state})"
        if sha is None or sha != render_sha:
            found.append(f"{name} names content {_short(str(sha))}, its render {render_sha}")
        if state != "published":
            if videos:
                found.append(f"{name} is not published but the channel holds {len(videos)}")
            continue
        if len(videos) != 1 or video_id not in videos[0][1].ids:
            found.append(
                f"{name}: the channel holds {sorted(sorted(v.ids) for _, v in videos)} for it, "
                f"the publication names {video_id}"
            )
            continue
        got = videos[0][1].sha256
        if got != render_sha:
            found.append(f"{name}: the channel's video {video_id} is other bytes ({got[:12]})")
    for i, video in enumerate(view.videos):
        if i not in claimed:
            found.append(f"channel video {sorted(video.ids)} belongs to no publication")
    return found + _quota_against_counters(conn, view, accounts)


def _never_arrived(conn: psycopg.Connection, view: ChannelView) -> dict[int, int]:
    """Per account: how many initiations the pipeline recorded as about to be sent the channel
    never received (a run killed between recording and sending one). Each publication's
    initiations carry its marker in the video's text, and the channel lists every one it
    received, counted or not."""
    never: dict[int, int] = {}
    for key, account, recorded in _rows(
        conn,
        """SELECT p.idempotency_key, p.account_id, count(*) FROM mdame.upload_charges c
             JOIN mdame.publications p ON p.id = c.publication_id GROUP BY 1, 2""",
    ):
        marker = publication_marker(key)
        received = sum(1 for text in view.initiations if marker in text)
        never[account] = never.get(account, 0) + max(0, int(recorded) - received)
    return never


def _quota_against_counters(
    conn: psycopg.Connection, view: ChannelView, accounts: dict[int, str]
) -> list[str]:
    found = []
    never = _never_arrived(conn, view)
    ledger: dict[tuple[int, str], int] = {
        (account, bucket): int(units)
        for account, bucket, units in _rows(
            conn,
            """SELECT account_id, bucket, sum(units) FROM mdame.quota_ledger
                WHERE state = 'committed' GROUP BY 1, 2""",
        )
    }
    for account, handle in sorted(accounts.items()):
        if handle not in view.accounts:
            continue
        for bucket in ("insert", "search", "units"):
            charged = view.charged.get((handle, bucket), 0)
            committed = ledger.get((account, bucket), 0)
            if bucket == "insert":
                # The channel counts an initiation when it receives it; the ledger spends it
                # from the moment it is recorded as about to be sent, unless its answer proved
                # it uncounted. So the ledger counts more only by initiations the channel never
                # received: recorded by a run killed before sending them.
                unsent = never.get(account, 0)
                if not charged <= committed <= charged + unsent:
                    found.append(
                        f"quota of account {handle}, insert bucket: the ledger committed "
                        f"{committed}, the channel charged {charged}"
                        + (f" ({unsent} recorded initiations never reached it)" if unsent else "")
                    )
                continue
            # A call of the units bucket killed around its request cannot be asked about: the
            # next run commits it, so the ledger may count that one call more than the channel
            # charged (one crash per case: a list call's unit, or thumbnails.set's 50), never
            # less.
            if committed - charged not in killed_call_excesses(1):
                found.append(
                    f"quota of account {handle}, {bucket} bucket: the ledger committed "
                    f"{committed}, the channel charged {charged}"
                )
    return found


HEALABLE_AT_REST = {("scene", "ready"), ("voice_track", "ready"), ("render", "approved")}


def _unfinished(conn: psycopg.Connection, units: list[Unit], clean: EndState | None) -> list[str]:
    """Every unit terminal (or where the clean run leaves it); no job held by a dead lease."""
    found = []
    for unit in units:
        legit = clean is not None and clean.units.get(unit.kind, {}).get(unit.key) == unit.state
        # Made media is settled although healing may reopen it when its file is damaged
        # (0006: a ready scene; 0007: a ready voice track, an approved render).
        settled = unit.terminal or (unit.kind, unit.state) in HEALABLE_AT_REST
        if not settled and not legit:
            found.append(f"{unit.kind} {unit.id} stuck in non-terminal state {unit.state}")
    for job_id, key, state, owner in _rows(
        conn, "SELECT id, idempotency_key, state, lease_owner FROM mdame.jobs ORDER BY id"
    ):
        if state == "running":
            # Every process of the case has exited: a running job's lease holder is dead.
            found.append(f"job {job_id} still held by the dead lease of {owner}")
        elif state != "succeeded" and (clean is None or clean.jobs.get(key) != state):
            found.append(f"job {job_id} ended {state}")
    return found


def _ledgers(conn: psycopg.Connection) -> list[str]:
    """reserved = committed/settled + released (nothing left open), and never above a cap."""
    found = []
    for key, state in _rows(
        conn, "SELECT quota_key, state FROM mdame.quota_ledger WHERE state = 'reserved'"
    ):
        found.append(f"quota reservation {_short(key)} left open ({state})")
    # Quota is spent on the account's real quota day (its quota_timezone's date when it was
    # reserved), never on the partition's date: a backfill cannot spend future or past days.
    for key, day, first, last in _rows(
        conn,
        """SELECT l.quota_key, l.day, (l.created_at AT TIME ZONE a.quota_timezone)::date,
                  (l.updated_at AT TIME ZONE a.quota_timezone)::date
             FROM mdame.quota_ledger l JOIN mdame.dimension_accounts a ON a.id = l.account_id
            WHERE l.day NOT BETWEEN (l.created_at AT TIME ZONE a.quota_timezone)::date
                                AND (l.updated_at AT TIME ZONE a.quota_timezone)::date
            ORDER BY l.id""",
    ):
        found.append(
            f"quota {_short(key)} is charged to {day}, not the account's quota day "
            f"({first}..{last})"
        )
    for account, day, cap, used in _rows(
        conn,
        """SELECT l.account_id, l.day, a.daily_quota_units,
                  sum(l.units) FILTER (WHERE l.state <> 'released')
             FROM mdame.quota_ledger l JOIN mdame.dimension_accounts a ON a.id = l.account_id
            GROUP BY 1, 2, 3""",
    ):
        if (used or 0) > cap:
            found.append(f"quota of account {account} on {day}: {used} units used, cap {cap}")
    published = {
        key
        for (key,) in _rows(
            conn, "SELECT idempotency_key FROM mdame.publications WHERE state = 'published'"
        )
    }
    publications = {key for (key,) in _rows(conn, "SELECT idempotency_key FROM mdame.publications")}
    for (key,) in _rows(conn, "SELECT quota_key FROM mdame.quota_ledger WHERE state = 'committed'"):
        if INITIATION_KEY in key:  # spent by an initiation the channel may have counted
            if key.split(INITIATION_KEY)[0] not in publications:
                found.append(f"quota {_short(key)} committed for no publication")
        elif key.split(UNITS_KEY)[0] not in published:
            found.append(f"quota {_short(key)} committed for no published publication")
    for key in sorted(published):
        n = _rows(
            conn,
            "SELECT count(*) FROM mdame.quota_ledger WHERE quota_key = %s AND state = 'committed'",
            [key],
        )[0][0]
        if n != 1:
            found.append(f"publication {_short(key)} has {n} committed quota entries, not 1")
    for key, state in _rows(
        conn, "SELECT attempt_key, state FROM mdame.budget_ledger WHERE state = 'reserved'"
    ):
        found.append(f"budget reservation {_short(key)} left open ({state})")
    for scope, period, cap, used in _rows(
        conn,
        """SELECT c.scope, c.period, c.cap_micros,
                  coalesce(sum(CASE l.state WHEN 'settled' THEN l.actual_micros
                                            WHEN 'reserved' THEN l.reserved_micros END), 0)
             FROM mdame.budget_caps c
             LEFT JOIN mdame.budget_ledger l ON l.scope = c.scope AND l.period = c.period
            GROUP BY 1, 2, 3""",
    ):
        if used > cap:
            found.append(f"budget {scope}/{period}: {used} micros used, cap {cap}")
    return found


def _attempts(conn: psycopg.Connection) -> list[str]:
    """Every provider attempt resolved, made under a pipeline lock with a lease (so only its
    holder, or a later one after the lease, may settle it), and at most one success per work key
    (no double post)."""
    found = []
    for attempt_id, key in _rows(
        conn,
        """SELECT id, work_key FROM mdame.provider_attempts
            WHERE lock_token IS NULL OR lease_expires_at IS NULL OR lease_grace_seconds IS NULL
            ORDER BY id""",
    ):
        found.append(f"provider attempt {attempt_id} for {_short(key)} has no lock lease")
    for attempt_id, key, status in _rows(
        conn,
        """SELECT id, work_key, status FROM mdame.provider_attempts
            WHERE status IN ('submitted', 'unknown') ORDER BY id""",
    ):
        found.append(f"provider attempt {attempt_id} for {_short(key)} left {status}")
    for key, n in _rows(
        conn,
        """SELECT work_key, count(*) FROM mdame.provider_attempts
            WHERE status = 'succeeded' GROUP BY 1 HAVING count(*) > 1""",
    ):
        found.append(f"work key {_short(key)} succeeded {n} times at the provider")
    return found


def _events(conn: psycopg.Connection, units: list[Unit]) -> list[str]:
    """Every transition event is an allowed edge, and each unit's events chain to its state."""
    found = [
        f"illegal transition in events: {kind} {subject} {src} -> {dst} (event {event_id})"
        for event_id, kind, subject, src, dst in _rows(
            conn,
            """SELECT e.id, e.subject_kind, e.subject_id, e.from_state, e.to_state
                 FROM mdame.events e
                WHERE e.event = 'transition'
                  AND NOT EXISTS (SELECT FROM mdame.allowed_transitions a
                                   WHERE a.kind = e.subject_kind AND a.from_state = e.from_state
                                     AND a.to_state = e.to_state)
                ORDER BY e.id""",
        )
    ]
    history: dict[tuple[str, int], list[tuple[str, str | None, str | None]]] = {}
    for kind, subject, event, src, dst in _rows(
        conn,
        """SELECT e.subject_kind, e.subject_id, e.event, e.from_state, e.to_state
             FROM mdame.events e JOIN mdame.work_kinds k ON k.kind = e.subject_kind
            WHERE e.event IN ('created', 'transition') ORDER BY e.id""",
    ):
        history.setdefault((kind, subject), []).append((event, src, dst))
    for unit in units:
        found += _chain(unit, history.get((unit.kind, unit.id), []))
    return found


def _chain(unit: Unit, events: list[tuple[str, str | None, str | None]]) -> list[str]:
    name = f"{unit.kind} {unit.id}"
    if not events or events[0][0] != "created":
        return [f"{name} has no 'created' event first"]
    state = events[0][2]
    for event, src, dst in events[1:]:
        if event == "created":
            return [f"{name} was created twice"]
        if src != state:
            return [f"{name}: transition {src} -> {dst} recorded while it was {state}"]
        state = dst
    if state != unit.state:
        return [f"{name} is {unit.state} but its events end at {state}"]
    return []


def _locks(conn: psycopg.Connection) -> list[str]:
    return [
        f"lock {name} still held by {holder} (token {token})"
        for name, holder, token in _rows(
            conn,
            """SELECT lock_name, holder, token FROM mdame.system_locks
                WHERE released_at IS NULL AND expires_at > now()""",
        )
    ]
