"""The MultiMNIST page's pair error against the one stored with the model: the verdict flips at two
standard errors of the difference (rules.beyond_chance), every number it quotes is the one compared,
and the stored figure is the zoo card's (the pair error, which the lab's pair accuracy measures again)."""

import dataclasses

import pytest

from capsviz.analysis import lab, rules
from capsviz.analysis import stored as stored_results
from capsviz.analysis.multimnist import PairAccuracy, stored_pair_error, stored_words
from capsviz.analysis.zoo import card
from capsviz.checkpoint import list_checkpoints
from capsviz.paths import shipped_checkpoints
from capsviz.registry import vector_routings
from capsviz.schema import Metrics

SHIPPED = [(p, m) for p, m in list_checkpoints(shipped_checkpoints()) if not isinstance(m, str)]
PAIRS = [(p, m) for p, m in SHIPPED if m.dataset == "multimnist"]


def measured(right: int, n: int) -> PairAccuracy:
    return PairAccuracy(100.0 * right / n, n, [], right)


def first_beyond(n: int, stored: tuple[float, int]) -> PairAccuracy:
    """The measure on n pairs with the fewest wrong pairs, above the stored share, whose gap is beyond chance."""
    error, n_stored = stored
    for k in range(round(n * error / 100), n + 1):
        res = measured(n - k, n)
        if rules.beyond_chance(res.error, n, error, n_stored):
            return res
    raise AssertionError("no such measure")


@pytest.mark.parametrize("n", [1_000, 100])
def test_the_verdict_flips_at_two_standard_errors_and_quotes_its_numbers(n):
    stored = (8.72, 10_000)
    beyond = first_beyond(n, stored)
    within = measured(beyond.right + 1, n)  # one wrong pair fewer: the other side of the threshold
    assert not rules.beyond_chance(within.error, n, *stored)
    for res, word in ((within, "within chance"), (beyond, "beyond chance")):
        said = stored_words(res, stored)
        gap, band = abs(res.error - 8.72), rules.noise(res.error, n, 8.72, 10_000)
        assert said.startswith(f"Pair error {res.error:.2f}% on these {n:,} pairs against the 8.72% stored with this model on 10,000 pairs")
        assert f"a gap of {gap:.2f} points" in said and f"±{band:.2f} points chance gives" in said
        assert word in said and ({"within chance", "beyond chance"} - {word}).pop() not in said
    assert "more than the ±" in stored_words(beyond, stored) and "within the ±" in stored_words(within, stored)


def test_the_review_s_example_is_within_chance_on_1000_pairs():
    said = stored_words(measured(906, 1_000), (8.72, 10_000))
    assert "Pair error 9.40% on these 1,000 pairs against the 8.72% stored" in said and "a gap of 0.68 points" in said
    assert f"±{rules.noise(9.4, 1000, 8.72, 10_000):.2f}" in said and "within chance" in said


def test_a_model_without_a_stored_pair_error_says_so():
    meta = dataclasses.replace(PAIRS[0][1], metrics=Metrics())
    assert stored_pair_error(meta) is None
    assert "No pair error is stored" in stored_words(measured(90, 100), None)
    mnist = next(m for p, m in SHIPPED if m.dataset == "mnist" and m.metrics.measured)
    assert stored_pair_error(mnist) is None  # one label per image: its error is no pair error


@pytest.mark.parametrize(("path", "meta"), PAIRS, ids=[p.stem for p, _ in PAIRS])
def test_the_stored_pair_error_is_the_zoo_cards_and_the_labs_pair_accuracy_measures_it_again(path, meta):
    error, n = stored_pair_error(meta)
    said = card(meta)
    assert said.error_name == "Pair error" and said.error == f"{error:.2f}%"
    row = lab.stored_rows([(path, meta)], vector_routings(), folders=[stored_results.shipped_folder()])[
        path.stem, lab.trained_with(meta.config)
    ]
    # as tests/test_shipped.py: at most 5 of 10,000 pairs may differ (the card's figure may come from the GPU that
    # exported the model, the lab's from a CPU)
    assert row.n_pairs == n and 100 - row.pair_accuracy == pytest.approx(error, abs=0.05 * 10_000 / n + 1e-9)
