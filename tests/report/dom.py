"""Reading an Allure 3 single-file report the way a person sees it (shared by report tests)."""

from __future__ import annotations

import base64
import html
import re
from html.parser import HTMLParser
from pathlib import Path


def embedded(index: Path) -> dict[str, bytes]:
    """The report's data files, as Allure 3 embeds them in the single file (base64)."""
    page = index.read_text(encoding="utf-8")
    return {
        name: base64.b64decode(value)
        for name, value in re.findall(r'd\("([^"]+)","([A-Za-z0-9+/=]*)"\)', page)
    }


class TreeLeaves(HTMLParser):
    """(title, status) of every test in Allure 3's rendered results tree."""

    def __init__(self) -> None:
        super().__init__()
        self.leaves: list[tuple[str, str]] = []
        self._status = ""
        self._in_title = False
        self._title: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        testid = dict(attrs).get("data-testid") or ""
        if testid.startswith("tree-leaf-status-"):
            self._status = testid.removeprefix("tree-leaf-status-")
        elif testid == "tree-leaf-title":
            self._in_title, self._title = True, []

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self._title.append(data)

    def handle_endtag(self, tag: str) -> None:
        if self._in_title and tag == "span":
            self.leaves.append(("".join(self._title).strip(), self._status))
            self._in_title = False


def visible_text(dom: str) -> str:
    dom = re.sub(r"<(script|style)\b[\s\S]*?</\1>", " ", dom)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", dom)))
