"""Chinese and Japanese write one sentence right after another ("0.094。每个维度"), English with a space
between them: the paragraphs the core builds from numbers join their sentences with `gap()`. Checked on
a few of them, built from small numbers, in each language."""

from __future__ import annotations

import re

import numpy as np
import pytest

from capsviz.analysis.explain.em import conv_assignment_words
from capsviz.analysis.explain.explorer import effect_words
from capsviz.analysis.playground import _dynamic_presets, dynamic_toy, dynamic_view
from capsviz.analysis.routing.attention import sweep_words
from capsviz.analysis.routing.charts import dynamic_sweep_words
from capsviz.i18n import FOLDERS, gap, speaking

# a space after a full stop, comma, colon, semicolon or closing bracket, before a Chinese or Japanese character
SPACED = re.compile(r"[。、，：；！？）」] (?=[\u3040-\u30ff\u3400-\u9fff])")


def paragraphs() -> list[str]:
    """Paragraphs of two or more sentences, as the explorer, routing, EM and playground pages show them."""
    effect = np.array([0.2, 0.001, 0.15, 0.002] + [0.05] * 12)
    lengths = np.array([[0.2, 0.9], [0.6, 0.5], [0.3, 0.8]])
    R = np.random.default_rng(0).dirichlet(np.ones(4), size=(9, 18)).astype(np.float64)  # (P, I, J), not all equal
    toy = dynamic_toy(next(iter(_dynamic_presets().values())), 3)
    return [
        effect_words(effect, np.full((28, 28), 0.1), "7", -0.25, 0.25),
        sweep_words([1, 0, 1], 1, "7"),
        dynamic_sweep_words(lengths, [1, 0, 1], 2, ["0", "1"], "digit capsule"),
        conv_assignment_words(R, 4, 1),
        dynamic_view(toy, 2).said,
    ]


def test_english_keeps_its_space_between_sentences():
    with speaking("en"):
        assert gap() == " "
        said = paragraphs()
    assert all(re.search(r"[.)] [A-Z(]", p) for p in said), said  # the check below has joins to look at


@pytest.mark.parametrize("lang", list(FOLDERS))
def test_no_space_between_chinese_or_japanese_sentences(lang):
    assert SPACED.search("0.094。 每个维度") and not SPACED.search("0.094。每个维度")
    with speaking(lang):
        said = paragraphs()
    found = [p[max(0, m.start() - 20) : m.end() + 10] for p in said for m in SPACED.finditer(p)]
    assert not found, found
