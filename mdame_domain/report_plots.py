"""The Strategic Auditor's PNG plots, drawn with matplotlib's Agg backend (no display needed).

matplotlib is imported inside `render_plots` only: importing the product (Dagster's code
locations, the CLI) must not pay for it, and a deployment that never makes a report never
loads it.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class Plot:
    name: str  # a file name: views.png
    caption: str
    png: bytes


def _figure(plt: Any, title: str) -> tuple[Any, Any]:
    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=100)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    return fig, ax


def _png(plt: Any, fig: Any) -> bytes:
    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return buffer.getvalue()


def render_plots(dimension: str, metrics: Mapping[str, Any]) -> list[Plot]:
    """Three plots of one week: total views by day, stage latency p50/p95, views by category."""
    import matplotlib

    matplotlib.use("Agg", force=True)  # never a GUI backend, whatever the environment says
    import matplotlib.pyplot as plt

    week = f"{metrics['week_start']} to {metrics['week_end']}"
    plots = []

    days = list(metrics["views_by_day"])
    fig, ax = _figure(plt, f"{dimension}: total views, {week}")
    ax.plot([d[5:] for d in days], list(metrics["views_by_day"].values()), marker="o")
    ax.set_ylabel("views (all videos)")
    trend = metrics["views_trend"]
    trend_text = "n/a" if trend is None else f"{trend * 100:+.1f}%"
    plots.append(
        Plot(
            "views.png",
            f"{dimension}: {metrics['views_gained']:,} views gained in the week "
            f"(vs the week before: {trend_text}); "
            f"{metrics['views_per_video'] or 0:,.0f} views per video.",
            _png(plt, fig),
        )
    )

    stages = list(metrics["stage_latency_s"])
    p50 = [metrics["stage_latency_s"][s]["p50"] or 0 for s in stages]
    p95 = [metrics["stage_latency_s"][s]["p95"] or 0 for s in stages]
    fig, ax = _figure(plt, f"{dimension}: stage latency (s), {week}")
    positions = range(len(stages))
    ax.bar([p - 0.2 for p in positions], p50, width=0.4, label="p50")
    ax.bar([p + 0.2 for p in positions], p95, width=0.4, label="p95")
    ax.set_xticks(list(positions), stages, rotation=20)
    ax.legend()
    plots.append(
        Plot("latency.png", f"{dimension}: stage latency p50 and p95 (seconds).", _png(plt, fig))
    )

    categories = metrics["category_views"]
    fig, ax = _figure(plt, f"{dimension}: views by topic category")
    names = list(categories) or ["none"]
    ax.barh(names, [categories[c]["views"] for c in categories] or [0])
    ax.set_xlabel("views")
    plots.append(
        Plot(
            "categories.png",
            f"{dimension}: views by topic category ({len(categories)} categories).",
            _png(plt, fig),
        )
    )
    return plots
