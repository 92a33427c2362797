"""Every link and resource of the built site resolves inside it, and nothing loads from the network.

Sphinx's own ``linkcheck`` goes to the internet; this reads the built HTML only.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest


class Page(HTMLParser):
    """The ids a page defines, its links (``a``/``area`` href) and the resources it loads."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.loads: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {key: value for key, value in attrs if value is not None}
        if "id" in values:
            self.ids.add(values["id"])
        if "name" in values and tag == "a":
            self.ids.add(values["name"])
        if tag in ("a", "area") and "href" in values:
            self.links.append(values["href"])
        elif tag == "link" and "href" in values and values.get("rel") in ("stylesheet", "preload", "icon"):
            self.loads.append(values["href"])
        elif tag in ("script", "img", "iframe", "source", "video", "audio") and "src" in values:
            self.loads.append(values["src"])


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(errors="replace"))
    return page


def site_pages(site: Path) -> list[Path]:
    """The site's pages: its HTML files but the theme's templates in ``_static`` (Jinja macros)."""
    return [path for path in site.rglob("*.html") if "_static" not in path.relative_to(site).parts]


def broken_links(site: Path) -> list[str]:
    """``page: target`` for every local href or src that names a missing file or a missing anchor."""
    pages = {path: parse(path) for path in site_pages(site)}
    broken = []
    for path, page in pages.items():
        for target in page.links + page.loads:
            parts = urlsplit(target)
            if parts.scheme in ("http", "https", "mailto", "data", "javascript") or parts.netloc:
                continue
            file = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if file.is_dir():
                file = file / "index.html"
            where = f"{path.relative_to(site)}: {target}"
            if not file.is_file() or not file.is_relative_to(site.resolve()):
                broken.append(where)
            elif parts.fragment and file.suffix == ".html":
                ids = pages[file].ids if file in pages else parse(file).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(where)
    return broken


def remote_loads(site: Path) -> list[str]:
    """Resources a page would fetch from the network (a CDN's script, a web font)."""
    return [
        f"{path.relative_to(site)}: {url}"
        for path in site_pages(site)
        for url in parse(path).loads
        if urlsplit(url).scheme in ("http", "https") or url.startswith("//")
    ]


@pytest.mark.slow
def test_every_internal_link_and_anchor_of_the_site_resolves(site):
    assert len(site_pages(site)) >= 25  # the landing page, tutorials, reference, ...
    assert broken_links(site) == []


@pytest.mark.slow
def test_the_site_loads_nothing_from_the_network(site):
    assert remote_loads(site) == []


def test_the_checker_finds_a_missing_page_a_missing_anchor_and_a_cdn(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.html").write_text('<h2 id="there">b</h2><a href="../a.html#top">a</a>')
    (tmp_path / "a.html").write_text(
        '<p id="top"></p><a href="sub/b.html#there">ok</a><a href="sub/b.html#gone">no anchor</a>'
        '<a href="c.html">no page</a><a href="https://example.org/">outside</a><img src="img/x.png">'
        '<script src="https://cdn.example/x.js"></script><a href="#top">self</a>'
    )
    assert broken_links(tmp_path) == ["a.html: sub/b.html#gone", "a.html: c.html", "a.html: img/x.png"]
    assert remote_loads(tmp_path) == ["a.html: https://cdn.example/x.js"]
