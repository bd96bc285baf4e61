"""Chance: every test error the app shows says what guessing gets for that many classes and
whether the model beats it (capsviz.analysis.rules.chance_words), flipping at two standard errors."""

import pytest

from capsviz.analysis import rules


@pytest.mark.parametrize(("classes", "labels", "chance"), [(3, 1, 200 / 3), (10, 1, 90.0), (2, 1, 50.0), (10, 2, 100 * 44 / 45)])
def test_chance_is_one_minus_one_over_the_guesses(classes, labels, chance):
    assert rules.chance_error(classes, labels) == pytest.approx(chance)


@pytest.mark.parametrize(("classes", "n"), [(3, 300), (10, 10_000), (5, 40)])
def test_the_verb_flips_at_two_standard_errors_below_chance(classes, n):
    c = rules.chance_error(classes)
    # the band depends on p itself: find p just inside and just outside it
    p_in = c - 0.5 * rules.spread(c, n)
    p_out = next(p for p in (c - k * 0.01 for k in range(1, 100_000)) if c - p > rules.spread(p, n))
    assert not rules.beats_chance(p_in, n, classes) and rules.beats_chance(p_out, n, classes)
    assert not rules.beats_chance(p_out + 0.02, n, classes)  # just inside the band
    said_in = rules.chance_words(p_in, n, classes)
    said_out = rules.chance_words(p_out, n, classes)
    assert "does not beat chance" in said_in and "beats chance by" in said_out
    for said, p in ((said_in, p_in), (said_out, p_out)):
        assert said.startswith(f"Guessing one of {classes} classes at random gets {c:.2f}% wrong (1 - 1/{classes})")
        assert f"{p:.2f}%" in said and f"±{rules.spread(p, n):.2f} points" in said and f"on {n:,} test images" in said
    assert f"by {c - p_out:.2f} points" in said_out


def test_worse_than_chance_is_said():
    said = rules.chance_words(95.0, 300, 3)
    assert "95.00% is worse than chance" in said
    assert "does not beat" in rules.chance_words(rules.chance_error(3) + 0.5 * rules.spread(66.67, 300), 300, 3)


def test_two_labels_at_once_count_pairs():
    said = rules.chance_words(5.2, 10_000, 10, 2)
    assert said.startswith("Guessing 2 of 10 classes at once at random gets 97.78% wrong (1 - 1/45)") and "beats chance" in said


def test_the_glossary_rule_quotes_the_numbers_the_rule_uses():
    text = rules.RULES["chance"]
    assert f"{rules.chance_error(10):.0f}%" in text and f"{rules.chance_error(3):.2f}%" in text and "two standard errors" in text
