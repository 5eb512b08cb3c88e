"""redis: PING of the Celery broker (and the result backend) when MDAME_GPU_EXECUTOR=celery."""

from __future__ import annotations

from mdame_cli.doctor.context import Doctor
from mdame_core import settings
from mdame_domain.doctor import Status, display_url, first_line


def check_redis(doctor: Doctor) -> None:
    from mdame_runtime.executors import CELERY_BACKEND_ENV, CELERY_BROKER_ENV, executor_name

    try:
        executor = executor_name()
    except ValueError as exc:
        doctor.add("redis", Status.FAIL, str(exc))
        return
    if executor != "celery":
        doctor.add("redis", Status.SKIP, f"MDAME_GPU_EXECUTOR={executor}: no Celery broker")
        return
    import redis

    broker = settings.get(CELERY_BROKER_ENV) or ""
    if not broker:
        doctor.add(
            "redis", Status.FAIL, f"MDAME_GPU_EXECUTOR=celery, but {CELERY_BROKER_ENV} is unset"
        )
        return
    urls = {"broker": broker}
    backend = settings.get(CELERY_BACKEND_ENV) or ""
    if backend and backend != broker:
        urls["backend"] = backend
    for role, url in urls.items():
        where = display_url(url)
        try:
            client = redis.Redis.from_url(
                url,
                socket_connect_timeout=doctor.options.timeout_s,
                socket_timeout=doctor.options.timeout_s,
            )
            client.ping()
            client.close()
        except redis.AuthenticationError:
            doctor.add("redis", Status.FAIL, f"{role} {where} refused the password")
            return
        except redis.RedisError as exc:
            doctor.add(
                "redis",
                Status.FAIL,
                f"{role} {where} not reachable ({type(exc).__name__}: {first_line(str(exc))})",
            )
            return
    doctor.add(
        "redis",
        Status.OK,
        "; ".join(f"{r} {display_url(u)} answers PING" for r, u in urls.items()),
    )
