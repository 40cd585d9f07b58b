# MIT License
#
# Copyright (c) 2026 interpreto-anisotropy contributors
"""The documentation works offline: its math renderer (KaTeX) and fonts ship with the site, nothing comes from a CDN.

The fast tests read mkdocs.yml and the vendored files; the slow one builds the site and scans every page and
stylesheet for a script, stylesheet or font of another host.
"""

from __future__ import annotations

import re

import pytest
from helpers.site import ROOT, remote_references

pytest_plugins = ["helpers.docs_site"]

yaml = pytest.importorskip("yaml", reason="PyYAML comes with the docs extra: pip install -e '.[docs]'")

DOCS = ROOT / "docs"


def _mkdocs_config() -> dict:
    # mkdocs.yml may hold !!python tags; the keys read here are plain.
    return yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)


@pytest.mark.parametrize("key", ["extra_javascript", "extra_css"])
def test_extra_assets_are_local_files(key):
    assets = _mkdocs_config().get(key, [])
    assert assets, f"mkdocs.yml has no {key}"
    for asset in assets:
        assert "//" not in asset, f"{key} loads {asset} from the network: ship it in docs/"
        assert (DOCS / asset).is_file(), f"{key} names docs/{asset}, which does not exist"


def test_katex_is_wired_to_arithmatex():
    config = _mkdocs_config()
    assert "javascripts/katex/katex.min.js" in config["extra_javascript"]
    assert "javascripts/katex/katex.min.css" in config["extra_css"]
    renderer = (DOCS / "javascripts" / "katex-render.js").read_text()
    assert ".arithmatex" in renderer and "katex.render" in renderer


def test_theme_loads_no_web_font():
    assert _mkdocs_config()["theme"].get("font") == "false", "theme.font: false keeps Material off Google Fonts"


def test_every_katex_font_is_shipped():
    css = (DOCS / "javascripts" / "katex" / "katex.min.css").read_text()
    fonts = re.findall(r"url\(([^)]+)\)", css)
    assert fonts
    missing = [font for font in fonts if not (DOCS / "javascripts" / "katex" / font).is_file()]
    assert not missing, f"katex.min.css needs fonts that are not shipped: {missing}"


@pytest.mark.slow
def test_built_site_references_no_other_host(built_site):
    site = built_site
    assert (site / "javascripts" / "katex" / "katex.min.js").is_file()
    concepts = (site / "concepts" / "index.html").read_text("utf-8")
    assert 'class="arithmatex"' in concepts and "katex.min.js" in concepts
    remote = remote_references(site)
    assert not remote, "pages load assets from the network:\n" + "\n".join(remote[:20])
