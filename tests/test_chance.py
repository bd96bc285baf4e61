"""Guessing and chance, two words for two things: every test error the app shows says what guessing at
random gets for that many classes and whether the model does better (capsviz.analysis.rules.guessing_words),
flipping at chance, two standard errors of the model's own error."""

import re
from pathlib import Path

import pytest
from test_glossary import shown_texts

from capsviz import glossary
from capsviz.analysis import rule_words, rules
from capsviz.viz import sweep_lines

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("classes", "labels", "guess"), [(3, 1, 200 / 3), (10, 1, 90.0), (2, 1, 50.0), (10, 2, 100 * 44 / 45)])
def test_guessing_is_one_minus_one_over_the_guesses(classes, labels, guess):
    assert rules.chance_error(classes, labels) == pytest.approx(guess)


@pytest.mark.parametrize(("classes", "n"), [(3, 300), (10, 10_000), (5, 40)])
def test_the_verb_flips_at_two_standard_errors_below_guessing(classes, n):
    c = rules.chance_error(classes)
    # the band depends on p itself: find p just inside and just outside it
    p_in = c - 0.5 * rules.spread(c, n)
    p_out = next(p for p in (c - k * 0.01 for k in range(1, 100_000)) if c - p > rules.spread(p, n))
    assert not rules.beats_chance(p_in, n, classes) and rules.beats_chance(p_out, n, classes)
    assert not rules.beats_chance(p_out + 0.02, n, classes)  # just inside the band
    said_in = rule_words.guessing_words(p_in, n, classes)
    said_out = rule_words.guessing_words(p_out, n, classes)
    assert f"no better than guessing: the gap of {c - p_in:.2f} points is within chance (" in said_in
    assert f"{c - p_out:.2f} points better than guessing, a gap beyond chance (" in said_out
    for said, p in ((said_in, p_in), (said_out, p_out)):
        assert said.startswith(f"Guessing one of {classes} classes at random gets {c:.2f}% wrong (1 - 1/{classes}): ")
        assert f"{p:.2f}% against {c:.2f}% for guessing" in said
        assert f"chance is ±{rules.spread(p, n):.2f} points here: how far {p:.2f}% could move on {n:,} other test images alone" in said
        assert "beats chance" not in said and "than chance" not in said  # chance is the ±, never guessing's error
        # issue 50: one sentence, each word in one sense: "at random" only with guessing, "chance" only the ±
        assert said.count("chance") == 2 and ("beyond chance (chance is ±" in said or "within chance (chance is ±" in said)
        assert said.count("at random") == 1 and said.index("at random") < said.index("chance")


def test_worse_than_guessing_is_said():
    said = rule_words.guessing_words(95.0, 300, 3)
    assert (
        f"95.00% against {rules.chance_error(3):.2f}% for guessing, {95 - rules.chance_error(3):.2f} points worse than guessing, a gap beyond chance"
        in said
    )
    assert "no better" in rule_words.guessing_words(rules.chance_error(3) + 0.5 * rules.spread(66.67, 300), 300, 3)


def test_two_labels_at_once_count_pairs():
    said = rule_words.guessing_words(5.2, 10_000, 10, 2)
    assert said.startswith("Guessing 2 of 10 classes at once at random gets 97.78% wrong (1 - 1/45): 5.20% against 97.78% for guessing")
    assert (
        f"{97.78 - 5.2:.2f} points better" in said
        and f"±{rules.spread(5.2, 10_000):.2f} points here: how far 5.20% could move on 10,000 other test pairs" in said
    )


def test_the_glossary_rules_quote_the_numbers_the_rules_use():
    text = rules.RULES["guessing"]
    assert f"{rules.chance_error(10):.0f}%" in text and f"{rules.chance_error(3):.2f}%" in text and "two standard errors" in text
    assert "two standard errors" in rules.RULES["chance"] and "guess" not in rules.RULES["chance"].lower()


def test_the_glossary_tells_chance_from_guessing():
    assert glossary.entries("chance")[0] == glossary.TERMS["chance"]
    assert glossary.entries("guessing")[0] == glossary.TERMS["guessing"]
    assert glossary.TERMS["chance"].explanation == rules.RULES["chance"]
    assert glossary.TERMS["guessing"].explanation == rules.RULES["guessing"]


GUESSING_AS_CHANCE = re.compile(r"\b(beats?|below|above|near) chance\b|\b(better|worse) than chance\b|\bchance (is|there is) ?\d")


def test_no_page_or_analysis_calls_guessing_chance():
    sources = [*ROOT.glob("pages/*.py"), *ROOT.glob("capsviz/**/*.py")]
    texts = [t for path in sources for t in shown_texts(path)] + [rule_words.guessing_words(p, 100, 10) for p in (5.0, 89.0, 99.0)]
    assert len(texts) > 500
    said = [t for t in texts if GUESSING_AS_CHANCE.search(t)]
    assert not said, said
    assert GUESSING_AS_CHANCE.search("0.38% beats chance by 89.62 points") and GUESSING_AS_CHANCE.search("chance there is 20%")
    assert GUESSING_AS_CHANCE.search("95.00% is worse than chance") and GUESSING_AS_CHANCE.search("never fell below chance")
    assert not GUESSING_AS_CHANCE.search("a smaller difference than chance gives may still be there")


def test_the_robustness_chart_marks_guessing_not_chance():
    fig = sweep_lines([0.0, 0.1], {"a": [99.0, 50.0]}, "t", "epsilon", "accuracy %", 10.0)
    assert [a.text for a in fig.layout.annotations] == ["guessing"]
