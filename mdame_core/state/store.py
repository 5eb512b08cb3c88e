"""`StateStore`: the one client class callers use, made of one mixin per subject."""

from __future__ import annotations

from mdame_core.state.alerts import Alerts
from mdame_core.state.analytics_reports import AnalyticsReports
from mdame_core.state.attempts_paid_calls import AttemptsPaidCalls
from mdame_core.state.budget_quota import BudgetQuota
from mdame_core.state.credentials import Credentials
from mdame_core.state.feed_cache import FeedCache
from mdame_core.state.jobs import Jobs
from mdame_core.state.locks_runs import LocksRuns
from mdame_core.state.param_sets import ParamSets
from mdame_core.state.phases import Phases
from mdame_core.state.publishing import Publishing
from mdame_core.state.reads import Reads
from mdame_core.state.registry import Registry
from mdame_core.state.retention import Retention
from mdame_core.state.reviews_safety import ReviewsSafety
from mdame_core.state.scene_cache import SceneCache
from mdame_core.state.voice_halt import VoiceHalts
from mdame_core.state.work_units import WorkUnits


class StateStore(
    LocksRuns,
    Registry,
    WorkUnits,
    Jobs,
    SceneCache,
    Retention,
    BudgetQuota,
    AttemptsPaidCalls,
    ReviewsSafety,
    Phases,
    Publishing,
    Credentials,
    VoiceHalts,
    Reads,
    FeedCache,
    AnalyticsReports,
    Alerts,
    ParamSets,
):
    """Pool-backed client of the mdame RPCs, acting as the application role, or, for the
    operator's commands, as the admin role (role="admin")."""
