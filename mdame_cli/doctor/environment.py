"""env: ENV set and valid, the provider set it implies (the provider checks need it), and with
ENV=prod every endpoint setting https (mdame_domain.prod_readiness.ENDPOINT_VARS)."""

from __future__ import annotations

from mdame_cli.doctor.context import Doctor
from mdame_core import settings
from mdame_domain.doctor import Status
from mdame_domain.prod_readiness import endpoint_problems, endpoints_message


def check_env(doctor: Doctor) -> None:
    from mdame_resources.providers.selection import PROVIDERS_VAR, provider_set

    try:
        doctor.env = settings.mdame_env()
    except settings.SettingsError as exc:
        doctor.add("env", Status.FAIL, str(exc))
        return
    try:
        doctor.providers = provider_set()
    except settings.SettingsError as exc:
        doctor.add("env", Status.FAIL, str(exc))
        return
    if doctor.env == "prod" and doctor.providers != "production":
        doctor.add(
            "env",
            Status.FAIL,
            f"ENV=prod accepts only the production providers, not "
            f"{PROVIDERS_VAR}={doctor.providers}",
        )
        return
    endpoints = endpoint_problems(settings.environment(), doctor.env)
    if endpoints:
        doctor.add("env", Status.FAIL, endpoints_message(endpoints))
        return
    doctor.add("env", Status.OK, f"ENV={doctor.env}, providers={doctor.providers}")
