"""What stops a run with ENV=prod before it starts: prod publishes for real, so it reads live
trend sources with the production providers, never the repository's sample feed files (their
stories are invented) nor the offline or fake providers."""

from __future__ import annotations

from collections.abc import Sequence

from mdame_domain.dimensions import DimensionConfig


def prod_problems(dimensions: Sequence[DimensionConfig], provider_set: str) -> list[str]:
    """One line per problem; empty when a prod run may start."""
    problems = []
    if provider_set != "production":
        problems.append(
            f"MDAME_PROVIDERS={provider_set}: ENV=prod runs the production providers only "
            "(unset MDAME_PROVIDERS)"
        )
    for dim in dimensions:
        if dim.active and all(source.is_file for source in dim.trend_sources()):
            files = ", ".join(s.url for s in dim.trend_sources())
            problems.append(
                f"dimension {dim.slug!r} reads only sample feed files ({files}): give it live "
                "`sources:` or http(s) `feeds:` in its YAML, or deactivate it"
            )
    return problems


def prod_problems_message(problems: Sequence[str]) -> str:
    return (
        "ENV=prod needs live trend sources and the production providers (credentials set; "
        "see README Providers); use ENV=dev for the offline demo. " + "; ".join(problems)
    )
