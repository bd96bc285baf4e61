"""The front door and the guides behind it: every relative link in README.md, CONTRIBUTING.md and
docs/*.md opens a file that is there (and a heading in it, where the link names one), and the
README's test command is the one CI runs."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def anchors(path: Path) -> set[str]:
    """GitHub's ids for a Markdown file's headings: lower case, punctuation but '-' dropped, spaces '-'."""
    text = FENCE.sub("", path.read_text())  # a '# comment' inside a code block is no heading
    heads = re.findall(r"^#{1,6} (.+)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def links(path: Path) -> list[str]:
    return [t for t in LINK.findall(FENCE.sub("", path.read_text())) if not re.match(r"[a-z]+:", t)]


def test_the_guides_are_there():
    assert {p.name for p in PAGES} >= {
        "README.md",
        "CONTRIBUTING.md",
        "class.md",
        "own-images.md",
        "own-model.md",
        "static-site.md",
        "command-line.md",
    }


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    broken = []
    for target in links(page):
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.name}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_readme_links_every_guide():
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in links(ROOT / "README.md")}
    missing = [p.name for p in (ROOT / "docs").glob("*.md") if p.resolve() not in linked]
    assert not missing, f"README.md links no way to {missing}"


def test_readme_test_command_is_what_ci_runs():
    command = ".venv/bin/python -m pytest -q -n 2 --dist loadfile"
    assert f"```bash\n{command}\n```" in (ROOT / "README.md").read_text()
    assert re.search(rf"^timeout \d+ {re.escape(command)}$", (ROOT / ".ci" / "run").read_text(), re.M)
