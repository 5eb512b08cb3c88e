"""The README stays a front page: short, its links resolve, and its Layout names every package
of the product (the rest of the documentation is the docs site, built by `make docs`)."""

from __future__ import annotations

import re

import yaml

from mdame_core.settings import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_is_a_front_page() -> None:
    assert len(README.splitlines()) <= 150


def test_the_readmes_links_and_pictures_resolve() -> None:
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    local = [t for t in targets if not re.match(r"[a-z]+://", t)]
    assert "docs/published-frames.png" in local and "docs/ui-asset-graph.png" in local
    missing = [t for t in local if not (REPO_ROOT / t).is_file()]
    assert not missing, f"README links to missing files: {missing}"


def test_the_layout_names_every_package() -> None:
    layout = README[README.index("## Layout") :]
    packages = sorted(p.name for p in REPO_ROOT.glob("mdame_*") if (p / "__init__.py").is_file())
    assert "mdame_runtime" in packages
    unnamed = [p for p in packages if not re.search(rf"^    {p}/", layout, re.M)]
    assert not unnamed, f"README Layout does not say what these hold: {unnamed}"


def test_every_page_of_the_site_is_in_docs_or_generated() -> None:
    config = yaml.load((REPO_ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)

    def pages(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [p for item in nav for p in pages(item)]
        if isinstance(nav, dict):
            return [p for value in nav.values() for p in pages(value)]
        return []

    listed = pages(config["nav"])
    generated = {"configuration.md"}  # docs/hooks.py writes it from the settings model
    assert generated <= set(listed)
    missing = [p for p in listed if p not in generated and not (REPO_ROOT / "docs" / p).is_file()]
    assert not missing, missing
    assert not (REPO_ROOT / "docs" / "configuration.md").exists(), "it is generated, not kept"
