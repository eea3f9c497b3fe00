"""README.md and docs/: the README stays short, every relative link lands on a file and a
heading of this repository, nothing points outside it, and the generated recipe page is the
code's."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: README.md and every Markdown page under docs/ (sub-folders included)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """``text`` without fenced code blocks (their ``#`` lines are no headings, their brackets
    no links)."""
    return _FENCE.sub("", text)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (letters of any script,
    digits, ``_`` and ``-`` kept), each space a ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors a Markdown page offers: each heading's slug (``-1``, ``-2`` ... for
    repeats, as GitHub numbers them) and every explicit ``id="..."``."""
    text = page.read_text(encoding="utf-8")
    out: set[str] = set(re.findall(r'\bid="([^"]+)"', text))
    seen: dict[str, int] = {}
    for m in re.finditer(r"^#{1,6} +(.+?) *#*$", _prose(text), re.M):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(page: Path) -> list[str]:
    """The targets of the Markdown links of a page, outside code."""
    return _LINK.findall(_INLINE_CODE.sub("", _prose(page.read_text(encoding="utf-8"))))


def test_slug_and_anchors_follow_github(tmp_path):
    assert slug("How long `headwise demo` takes (CPU)") == "how-long-headwise-demo-takes-cpu"
    assert slug("English -> Chinese translation (Tatoeba) on cpu") == \
        "english---chinese-translation-tatoeba-on-cpu"
    assert slug("The demo's near misses, 中文") == "the-demos-near-misses-中文"
    page = tmp_path / "p.md"
    page.write_text("# A\n## Usage\n```bash\n# not a heading\n```\n### Usage\n"
                    '<a id="x-y"></a>text [l](#a) `[no](link.md)`\n', encoding="utf-8")
    assert anchors(page) == {"a", "usage", "usage-1", "x-y"}
    assert links(page) == ["#a"]


def test_the_readme_is_short_and_keeps_the_two_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 160
    first_block = re.search(r"^```bash\n(.*?)^```", text, re.M | re.S).group(1)
    assert [line.split("#")[0].strip() for line in first_block.splitlines()] == \
        ["./run demo", "./run test"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(page):
    bad = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            bad.append(f"{target}: no such file")
            continue
        if ROOT not in dest.parents and dest != ROOT:
            bad.append(f"{target}: outside the repository")
            continue
        if anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: {dest.relative_to(ROOT)} has no heading #{anchor}")
    assert not bad, f"{page.relative_to(ROOT)}: " + "; ".join(bad)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_page_points_outside_the_repository(page):
    assert "../shared" not in page.read_text(encoding="utf-8")


def test_every_top_level_docs_page_is_linked_from_the_readme():
    readme_links = {(ROOT / t.partition("#")[0]).resolve() for t in links(ROOT / "README.md")}
    assert {p.resolve() for p in (ROOT / "docs").glob("*.md")} <= readme_links


def test_the_recipe_page_holds_the_recipe_table_of_the_code():
    from headwise.intent.training.recipe import ARCHITECTURES, TASKS, Decision, Levers
    from headwise.intent.training.recipe.reference import recipe_table

    page = (ROOT / "docs" / "recipe.md").read_text(encoding="utf-8")
    table = page.split("<!-- recipe-fields:begin -->\n", 1)[1].split(
        "\n<!-- recipe-fields:end -->", 1)[0]
    assert table == recipe_table(), "docs/recipe.md's table is stale: paste recipe_table()"
    rows = table.splitlines()[2:]
    fields = {(r.split(" | ")[0].lstrip("| "), r.split(" | ")[1].strip("`")) for r in rows}
    parts = {**{f"architecture ({c.NAME})": c for c in ARCHITECTURES.values()},
             "levers": Levers, "decision": Decision,
             **{f"task ({c.NAME})": c for c in TASKS.values()}}
    for label, part in parts.items():  # every field of every part (train: TrainConfig's docs)
        assert {f.name for f in dataclasses.fields(part)} == {
            name for lab, name in fields if lab == label}, label
    assert all(r.count(" | ") >= 4 and not r.endswith("|  |") for r in rows)
