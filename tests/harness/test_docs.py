"""The README stays a short reference, and every relative link in the docs leads to a file that exists."""

import re

import pytest

from tests.testing_utils import ROOT

PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_readme_is_short_and_indexes_every_docs_page():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    for page in (ROOT / "docs").glob("*.md"):
        assert f"(docs/{page.name})" in readme, f"the README's index lacks docs/{page.name}"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_relative_links_resolve(page):
    targets = re.findall(r"\]\(([^)#:\s]+)(?:#[^)]*)?\)", page.read_text())
    assert [t for t in targets if not (page.parent / t).exists()] == []


def test_contributing_names_every_module_in_its_folders_row():
    """CONTRIBUTING's layout table: each module is named in a row whose first cell is its folder (or a file in it)."""
    rows = [
        line.split(" | ", 1) for line in (ROOT / "CONTRIBUTING.md").read_text().splitlines() if line.startswith("| `")
    ]
    modules = [p for folder in ("tpu_demo", "harness", "benchmarks") for p in (ROOT / folder).rglob("*.py")]
    missing = [
        str(path.relative_to(ROOT))
        for path in modules
        if path.name != "__init__.py"
        and not any(
            f"`{path.parent.relative_to(ROOT)}/" in first and f"{path.name}`" in f"{first} {rest}"
            for first, rest in rows
        )
    ]
    assert missing == []
