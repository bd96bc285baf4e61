"""The Reproduction page's sentences: each of our test errors beside the paper's, how far apart and
whether beyond chance (capsviz.analysis.rules), built in capsviz.analysis.reproduction from the very
numbers the tables show. Both sides of the rule; every shipped checkpoint's rows."""

import re
from pathlib import Path

import pytest

from capsviz.analysis import rules
from capsviz.analysis.reproduction import PAPER_N, Gap, ours_text, paper_text, tables
from capsviz.checkpoint import list_checkpoints
from capsviz.schema import CheckpointMeta

CHECKPOINTS = Path(__file__).resolve().parents[1] / "checkpoints"
SENTENCE = re.compile(r"ours (\S+)% against the paper's (\S+)%: (?:(\S+) points (above|below) it|the same to two decimals)")


def two_sides(paper: float, n: int) -> tuple[float, float]:
    """An error just within chance of `paper` and one just beyond, both measured on n images (found with rules)."""
    within = beyond = paper
    while not rules.beyond_chance(beyond, n, paper, n):
        within, beyond = beyond, round(beyond + 0.01, 2)
    return within, beyond


@pytest.mark.parametrize("paper, n", [(0.25, 10_000), (5.2, 10_000)])
def test_gap_words_on_both_sides_of_beyond_chance(paper, n):
    within, beyond = two_sides(paper, n)
    near, far = Gap(within, n, paper, n, True), Gap(beyond, n, paper, n, True)
    assert near.beyond is False and far.beyond is True
    assert "within chance" in near.words() and "cannot tell the two apart" in near.words() and "beyond" not in near.words()
    assert "beyond chance" in far.words() and "within" not in far.words()
    for g in (near, far):
        assert f"{abs(round(g.ours, 2) - paper):.2f} points above it" in g.words()
        assert f"give gaps up to {g.noise:.2f} points" in g.words() and f"{n:,} test images here" in g.words()


def test_gap_words_below_unknown_and_smaller():
    assert "0.10 points below it" in Gap(0.15, 10_000, 0.25, 10_000, True).words()
    assert "the same to two decimals" in Gap(0.251, 10_000, 0.25, 10_000, True).words()
    unknown = Gap(0.5, None, 0.25, 10_000, True)
    assert unknown.beyond is None and "chance cannot be ruled out" in unknown.words() and "beyond" not in unknown.words()
    assert "smaller than the paper's model" in Gap(0.5, 100, 0.25, 10_000, False).words()
    assert "smaller" not in Gap(0.5, 100, 0.25, 10_000, True).words()


def shipped() -> list[tuple[str, CheckpointMeta]]:
    return [(p.name, m) for p, m in list_checkpoints(CHECKPOINTS) if isinstance(m, CheckpointMeta)]


def test_every_shipped_comparison_quotes_the_tables_numbers():
    found = shipped()
    shown = tables(found)
    assert shown.gaps, "the shipped checkpoints fill at least one cell beside a paper's number"
    cells = {}  # note number -> (ours, paper) as Table 1 shows them
    for line in shown.table1.splitlines()[2:]:
        parts = [p.strip() for p in line.strip("|").split("|")]
        for ours, paper in ((parts[3], parts[4]), (parts[5], parts[6])):
            if m := re.fullmatch(r"\*\*(\S+)\*\*(?: †)? \((\d+)\)", ours):
                cells[int(m[2])] = (m[1], paper)
    by_name = dict(found)
    for where, gap in shown.gaps:
        said = gap.words()
        ours, paper, points, side = SENTENCE.search(said).groups()
        if m := re.match(r"\((\d+)\)", where):  # Table 1: the numbered cell
            assert (ours, paper) == cells[int(m[1])], where
        else:  # Hinton et al.: the row for that checkpoint
            name = re.search(r"`(\S+)`", where)[1]
            row = next(r for r in shown.em.splitlines() if f"(`{name}`)" in r)
            assert f"| {paper} | " in row and f"{ours}" in row, where
            assert ours == ours_text(by_name[name].metrics.test_error)
        assert points == f"{abs(float(ours) - float(paper)):.2f}" and side == ("above" if float(ours) > float(paper) else "below")
        assert paper == paper_text(gap.paper) and gap.n_paper in PAPER_N.values()
        verdict = rules.beyond_chance(gap.ours, gap.n_ours, gap.paper, gap.n_paper)
        assert ("beyond chance" in said) == verdict and ("within chance" in said) == (not verdict), where
        assert f"up to {rules.noise(gap.ours, gap.n_ours, gap.paper, gap.n_paper):.2f} points" in said
        assert ("smaller than the paper's model" in said) == (not gap.paper_size)


def test_no_sentence_calls_a_gap_beyond_chance_close():
    for _, gap in tables(shipped()).gaps:
        said = gap.words()
        if gap.beyond:
            assert not re.search(r"\b(match|matching|close|same)\b", said), said


def test_a_hostile_file_name_stays_inside_its_cell():
    """A file name or a stored note is user text: it must neither break the table nor act as Markdown."""
    name, meta = next((n, m) for n, m in shipped() if n == "capsnet-mnist.safetensors")
    hostile = "![x](https://example.com/a.png)|`b`.safetensors"
    shown = tables([(hostile, meta)])
    row = next(line for line in shown.table1.splitlines() if line.startswith("| CapsNet | 3 | yes"))
    assert len(re.split(r"(?<!\\)\|", row)) == 9  # 7 cells, the name's pipe escaped
    assert "`b`" not in "\n".join(shown.notes) and "\\|" in shown.notes[0]
    # two code spans, the name's and the file's own record of how it was measured: nothing of either outside them
    assert re.fullmatch(r"`[^`]+`, as its file records it: `[^`]+`", shown.notes[0]), shown.notes[0]


@pytest.mark.parametrize("lang", ["zh-Hans", "ja"])
def test_a_header_breaks_at_spaces_only(lang):
    """A phone's table too wide for it squeezes a Chinese or Japanese header to one character a line
    unless its characters are joined: every two of them in a header and in a row's names are."""
    from capsviz.i18n import speaking
    from capsviz.i18n import t as say

    with speaking(lang):
        shown = tables([])
        words = say("routing iterations")
    for table in (shown.table1, shown.em):
        head = table.splitlines()[0]
        assert re.search(r"[\u3040-\u30ff\u4e00-\u9fff]", head), head
        assert not re.search(r"[\u3040-\u30ff\u4e00-\u9fff]{2}", head), head  # a joiner between every two
        for row in table.splitlines()[2:]:
            assert not re.search(r"[\u3040-\u30ff\u4e00-\u9fff]{2}", row.split("|")[1] + row.split("|")[2]), row  # its names too
    assert f"| {words} |" in shown.table1.splitlines()[0].replace("\u2060", "")  # the same words, joined
