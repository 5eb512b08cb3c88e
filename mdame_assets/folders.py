"""A code location's definitions come from its folder (mdame_assets/defs/ for the orchestrator,
mdame_assets/gpu_defs/ for the GPU location): every module under it is imported and each
asset, asset spec, asset check, job, schedule and sensor at its top level is taken, lists of
them too, so a module added to the folder is part of the location with no other edit. An object
imported into several of its modules (the asset a check targets) is one definition.

What depends on a setting (a job's retry policy and executor, a sensor's interval) is built in
a module's `@dg.definitions` function, which the folder loader calls as the location loads; the
module's other top-level objects are then not taken, so that function returns them all. Nothing
in the folders reads a setting as it is imported."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from types import ModuleType

import dagster as dg

from mdame_core import settings
from mdame_core.settings import REPO_ROOT

# Each location's definitions as last loaded, with the settings they were built from.
_loaded: dict[str, tuple[tuple[str, ...], dg.Definitions]] = {}


def load_folder(folder: ModuleType) -> dg.Definitions:
    """Every definition under `folder`, with neither resources nor an executor."""
    # The component tree that dg.load_from_defs_folder and dg.load_defs build, asked for the
    # folder's definitions only. Both of those build the tree's root, which adds the component
    # catalog of every installed Dagster integration (metadata for the UI's scaffolding): 1.5 s
    # more per load, paid again in every step process of a multiprocess run. And
    # load_from_defs_folder finds its folder through the dg project of the working folder,
    # while this package has two locations. The project root matters only to YAML
    # components, of which there are none.
    # Its module loader is marked preview; both entry points silence that warning as well.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        tree = dg.ComponentTree.from_module(defs_module=folder, project_root=REPO_ROOT)
        return tree.build_defs(tree.defs_module_path)


def load_location(
    folder: ModuleType, finish: Callable[[dg.Definitions], dg.Definitions]
) -> dg.Definitions:
    """A code location's definitions, as it loads: every setting is checked first, so a bad
    value stops the location with a message naming it; then the folder's definitions are built
    from the settings of this moment, and `finish` adds the resources and executor.

    Dagster loads a location's definitions again in each run worker and step process; a load
    with the same settings as the last one in this process returns that one's definitions (the
    run server builds them once, before it forks its run workers)."""
    seen = tuple(settings.raw(name) for name in settings.Settings.model_fields)
    last = _loaded.get(folder.__name__)
    if last is not None and last[0] == seen:
        return last[1]
    settings.validate()
    _refuse_another_first_day()
    defs = finish(load_folder(folder))
    _loaded[folder.__name__] = (seen, defs)
    return defs


def _refuse_another_first_day() -> None:
    """The one setting fixed for the life of a process: every partitioned asset is defined with
    the day partitions, built from MDAME_FIRST_DAY when the first load imports them. A later
    load that asks for another first day is refused rather than silently given the first."""
    partitions = sys.modules.get("mdame_assets.partitions")
    wanted = settings.get("MDAME_FIRST_DAY")
    if partitions is not None and wanted != partitions.FIRST_DAY:
        raise settings.SettingsError(
            f"MDAME_FIRST_DAY={wanted.isoformat()!r} is not the {partitions.FIRST_DAY} this "
            "process built its partitions with: start a new process to change it"
        )
