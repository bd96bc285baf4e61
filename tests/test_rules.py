"""The rules that turn numbers into words: each verb flips exactly at its threshold."""

import pytest

from capsviz.analysis import rule_words, rules


def test_near_uniform_needs_both_the_entropy_and_the_share():
    e = rules.NEAR_UNIFORM_ENTROPY
    assert rules.near_uniform(e + 0.01)
    assert not rules.near_uniform(e - 0.01)
    assert not rules.near_uniform(e)
    u = 0.1
    assert rules.near_uniform(e + 0.01, 1.4 * u, u)
    assert not rules.near_uniform(e + 0.01, 1.6 * u, u)
    assert not rules.near_uniform(e - 0.01, 1.0 * u, u)
    assert "near uniform" in rule_words.uniform_words(e + 0.01, 1.4 * u, u)
    says = rule_words.uniform_words(e + 0.01, 1.6 * u, u)
    assert says.startswith("away from uniform") and "0.16" in says and "1.5 times" in says
    assert rule_words.uniform_words(0.5).startswith("away from uniform") and "50.0%" in rule_words.uniform_words(0.5)


def test_beyond_chance_flips_at_two_standard_errors():
    n = 10_000
    band = rules.noise(1.0, n, 1.0, n)
    assert rules.beyond_chance(1.0, n, 1.0 + 1.5 * band, n)
    assert not rules.beyond_chance(1.0, n, 1.0 + 0.5 * band, n)
    assert rules.spread(0.0, 18) > 5  # no error on 18 images is far from a certain 0%


@pytest.mark.parametrize(
    "first,last,word",
    [(1.0, 2.0, "rises"), (2.0, 1.0, "falls"), (1.0, 1.05, "stays about level"), (6.9e-4, 1.4e-3, "rises"), (0, 0, "stays about level")],
)
def test_trend(first, last, word):
    assert rules.trend(first, last) == word


def test_speed_is_claimed_only_beyond_the_spread_of_repeated_timings():
    quick = rules.Timing((1.0, 1.1, 1.2, 1.0, 1.05))
    slow = rules.Timing((3.0, 3.2, 2.9, 3.1, 3.0))
    assert rules.faster(quick, slow) == pytest.approx(3.0 / 1.05)
    assert rules.faster(slow, quick) is None
    assert rule_words.time_words("a", quick, "b", slow).endswith("a is 2.9x faster.")
    assert rule_words.time_words("b", slow, "a", quick).endswith("a is 2.9x faster.")
    overlapping = rules.Timing((1.0, 3.5, 1.1, 1.2, 1.0))
    assert rules.faster(overlapping, slow) is None and "too few" in rule_words.time_words("a", overlapping, "b", slow)
    once = rules.Timing((1.0,))
    assert rules.faster(once, slow) is None and "one timing" in rule_words.time_words("a", once, "b", slow)


def test_long_votes_flip_at_the_near_uniform_share_and_never_decide_near_uniform():
    u = 0.1
    assert rules.long_votes_move(0.151, u) and not rules.long_votes_move(0.149, u)
    assert rule_words.long_votes_words("7", 0.149, u, 0.101) == ""
    said = rule_words.long_votes_words("7", 0.218, u, 0.121)
    assert (
        said == "Weighted by prediction length, 7 gets 0.218, 2.2 times uniform: routing moves mainly the capsules with long predictions."
    )
    # the plain mean at the factor too: "mainly" would not hold, the long ones only move more (or no more)
    said = rule_words.long_votes_words("7", 0.3, u, 0.2)
    assert said.startswith("Weighted by prediction length, 7 gets 0.300, 3.0 times uniform, and the plain mean, 0.200, is 2.0 times")
    assert said.endswith("more than the rest.") and "mainly" not in said
    assert rule_words.long_votes_words("7", 0.2, u, 0.3).endswith("no more than the rest.")
    # the near-uniform verdict reads the plain mean alone, whatever the weighted one
    assert rules.near_uniform(0.999, 0.121, u) and "near uniform" in rule_words.uniform_words(0.999, 0.121, u)
    assert "plain mean" in rules.RULES["near uniform"] and "does not decide" in rules.RULES["long votes"]


L = rules.LEVEL


@pytest.mark.parametrize(
    "path, said",
    [
        # the reported /em path: 14.4% -> 97.1% -> 74.6% peaked, then fell
        ([0.144, 0.971, 0.746], "rises to 97.1% at iteration 2, then falls"),
        # the reported /routing path: the change doubles at iteration 5, then ends near its start
        ([8.7e-3, 1.2e-2, 1.6e-2, 1.86e-2, 1.4e-2, 1.1e-2, 9.2e-3], "rises to 1.9% at iteration 4, then falls"),
        ([1.0, 0.5, 0.9], "falls to 50.0% at iteration 2, then rises"),  # dipped
        ([1.0, 1.5, 2.0], "rises"),  # monotone
        ([2.0, 1.5, 1.0], "falls"),
        ([1.0, 1.05, 1.0], "stays about level"),  # a bump within LEVEL of the ends
        ([1.0, 1.0 + L * 1.0 + 0.01, 1.0], "rises to 111.0% at iteration 2, then falls"),  # just beyond the band
        ([1.0, 1.0 + L * 1.0 - 0.01, 1.0], "stays about level"),  # just inside it
        ([1.0, 2.0], "rises"),  # two values: no middle
    ],
)
def test_path_trend_reads_the_whole_path(path, said):
    assert rules.path_trend(path, "{:.1%}") == said


def test_path_trend_band_is_taken_like_trend_and_bounded_trend():
    # relative band: LEVEL of the larger end; the middle must leave [min, max] of the ends by more
    assert rules.turn([10.0, 11.5, 11.0]) is None  # 11.5 is 0.5 above 11.0, within 1.1
    assert rules.turn([10.0, 12.2, 11.0]) == 1  # 1.2 above, beyond 1.1
    # bounded: absolute LEVEL whatever the start
    assert rules.path_trend([0.05, 0.05 + L + 0.01, 0.05], bounded=True) == f"rises to {0.05 + L + 0.01:.3g} at iteration 2, then falls"
    assert rules.path_trend([0.05, 0.05 + L - 0.01, 0.05], bounded=True) == "stays about level"
    assert rules.path_trend([0.3, 0.3 + L + 0.01], bounded=True) == "rises"
    # the farthest turn is the one said, numbered from `start`
    assert rules.path_trend([1.0, 0.5, 0.2, 0.9], "{:.1f}", start=2) == "falls to 0.2 at iteration 4, then rises"


def test_the_near_uniform_rule_says_which_coupling_it_reads():
    assert "predicted class" in rules.RULES["near uniform"] and "peaks / dips" in rules.RULES


def test_uniform_words_say_evenness_in_plain_words_with_what_100_means_on_both_sides():
    # issue 50: "they keep 100.0% of its entropy" had no antecedent and left "entropy" unexplained
    above = rule_words.uniform_words(rules.NEAR_UNIFORM_ENTROPY + 0.001, 0.10, 0.1)
    below = rule_words.uniform_words(rules.NEAR_UNIFORM_ENTROPY - 0.001, 0.10, 0.1)
    assert above.startswith("near uniform: their evenness is 95.1% (100% = spread evenly over all 10 classes), more than 95%")
    assert below.startswith("away from uniform: their evenness is 94.9% (100% = spread evenly over all 10 classes), not more than 95%")
    assert "the predicted class gets 0.10 on average" in above  # a mean, not every capsule's coupling
    assert rule_words.uniform_words(0.5) == "away from uniform: their evenness is 50.0% (100% = spread evenly), not more than 95%"
    for said in (above, below, rules.RULES["near uniform"]):
        assert "its entropy" not in said and "nats" not in said
    assert "100% when each gets the same share, 0% when one gets all of it" in rules.RULES["near uniform"]  # evenness explained
