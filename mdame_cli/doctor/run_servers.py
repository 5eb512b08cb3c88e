"""run_servers: each run server named in MDAME_RUN_SERVERS answers, as the location it is named
for. Unset: SKIP (every run is spawned by its code server). Unreachable: WARN (its location's
runs are spawned by the code server instead, at about 3.5 CPU s more a run). Another location
answering, or a refusal (a run server answers only its own user): FAIL (the runs sent there
would be refused)."""

from __future__ import annotations

from mdame_cli.doctor.context import Doctor
from mdame_core import settings
from mdame_domain.doctor import Status, first_line


def check_run_servers(doctor: Doctor) -> None:
    from mdame_runtime.run_launcher import SERVERS_ENV, parse_servers
    from mdame_runtime.run_server import call

    raw = settings.raw(SERVERS_ENV)
    try:
        servers = parse_servers(raw)
    except ValueError as exc:
        doctor.add("run_servers", Status.FAIL, f"{SERVERS_ENV}: {exc}")
        return
    if not servers:
        doctor.add("run_servers", Status.SKIP, f"{SERVERS_ENV} unset: code servers spawn every run")
        return
    for location, address in servers.items():
        name = f"run_servers:{location}"
        try:
            reply = call(address, {"ping": True}, doctor.options.timeout_s)
        except (OSError, ValueError) as exc:
            doctor.add(
                name,
                Status.WARN,
                f"{address} not reachable ({type(exc).__name__}: {first_line(str(exc))}): "
                f"the code server spawns {location}'s runs instead; start `mdame run-server "
                f"--location {location} --socket {address}` on this host, as this user",
            )
            continue
        if "error" in reply:
            # Another user's run server (it answers only its own), or a broken reply.
            doctor.add(
                name,
                Status.FAIL,
                f"{address} refused: {first_line(str(reply['error']))}: the daemon and the "
                "webserver must run as the run server's user",
            )
            continue
        if reply.get("location") != location:
            doctor.add(
                name,
                Status.FAIL,
                f"{address} is the run server of {reply.get('location')!r}, not {location!r}: "
                f"fix {SERVERS_ENV}",
            )
            continue
        runs = reply.get("runs")
        count = len(runs) if isinstance(runs, list) else 0
        doctor.add(name, Status.OK, f"{address} answers (pid {reply.get('pid')}, {count} runs)")
