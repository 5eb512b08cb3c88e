"""A code location's definitions come from its folder (mdame_assets/defs/ for the orchestrator,
mdame_assets/gpu_defs/ for the GPU location): every module under it is imported and each
asset, asset spec, asset check, job, schedule and sensor at its top level is taken, lists of
them too, so a module added to the folder is part of the location with no other edit. An object
imported into several of its modules (the asset a check targets) is one definition."""

from __future__ import annotations

import warnings
from types import ModuleType

import dagster as dg

from mdame_core.settings import REPO_ROOT


def load_folder(folder: ModuleType) -> dg.Definitions:
    """Every definition under `folder`, with neither resources nor an executor."""
    # The component tree that dg.load_from_defs_folder and dg.load_defs build, asked for the
    # folder's definitions only. Both of those build the tree's root, which adds the component
    # catalog of every installed Dagster integration (metadata for the UI's scaffolding): 1.5 s
    # more per load, paid again in every step process of a multiprocess run. And
    # load_from_defs_folder finds its folder through the one [tool.dg] project of
    # pyproject.toml, while this package has two locations. The project root matters only to
    # YAML components, of which there are none.
    # Its module loader is marked preview; both entry points silence that warning as well.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        tree = dg.ComponentTree.from_module(defs_module=folder, project_root=REPO_ROOT)
        return tree.build_defs(tree.defs_module_path)
