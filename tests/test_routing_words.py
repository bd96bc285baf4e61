"""The dynamic routing page's sentences (capsviz.analysis.routing): each verb on both sides of its
rule's threshold (capsviz.analysis.rules), every quoted number the figure's own, the uniform share
and the entropy along the model's softmax axis, the coupling maps placed by the grouping index map;
and for every shipped model, the numbers the captions quote equal the numbers the charts draw."""

import re
from pathlib import Path

import numpy as np
import pytest
import torch

from capsviz import checkpoint as ckpt
from capsviz import registry
from capsviz.analysis import rule_words, rules
from capsviz.analysis.routing import (
    AttentionTrace,
    DynamicTrace,
    attention_trace,
    attention_words,
    canvas_words,
    capsule_axes,
    capsule_labels,
    convergence_words,
    coupling_summary,
    detail_words,
    dynamic_sweep_words,
    dynamic_trace,
    entropy_figure,
    entropy_of,
    entropy_words,
    iteration_sweep,
    length_words,
    map_words,
    once_words,
    span_words,
    summary_words,
    sweep_words,
    times,
    trained_with_words,
    unplaced_words,
)
from capsviz.config import preset
from capsviz.entries import Layout
from capsviz.families.capsnet.model import primary_places

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted((ROOT / "checkpoints").glob("*.safetensors"))


def numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"-?\d+\.\d+(?:e[-+]\d+)?", text)]


def trace(c: np.ndarray, softmax="classes", grouping="paper", grid=2, types=3, dim=4, agreement=None, layout=None) -> DynamicTrace:
    T, I, J = c.shape
    return DynamicTrace(
        c,
        np.linspace(0.2, 0.3, T)[:, None].repeat(J, 1),
        np.full(T, 0.01),
        np.abs(np.diff(c, axis=0)).mean((1, 2)),
        np.zeros((I, J)) if agreement is None else agreement,
        entropy_of(c, softmax),
        layout or Layout(grid, dim, types, grouping, primary_places(grouping, types, dim, grid)),
        softmax,
    )


def softmax(x, axis):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def test_paper_places_average_each_position_over_the_capsule_types():
    rng = np.random.default_rng(0)
    G, T, K, J = 3, 4, 8, 5
    c = softmax(rng.normal(size=(2, G * G * T, J)), -1)
    tr = trace(c, grid=G, types=T, dim=K, agreement=rng.normal(size=(G * G * T, J)))
    np.testing.assert_allclose(tr.coupling_maps(1), c[1].reshape(G, G, T, J).mean(2).transpose(2, 0, 1))
    np.testing.assert_allclose(tr.agreement_map(2), tr.agreement[:, 2].reshape(G, G, T).sum(2))
    np.testing.assert_array_equal(tr.by_capsule(c[1, :, 0]), c[1, :, 0].reshape(G * G, T).T)
    assert capsule_axes(tr) == (f"position 1-{G * G}, row by row", "capsule type")


def test_view_places_spread_each_capsule_over_the_positions_of_its_values():
    G, T, K = 6, 4, 8
    place = primary_places("view", T, K, G)  # (36, 144)
    np.testing.assert_allclose(place.sum(1), 1)  # each position's values, all accounted for
    # capsule 0 is values 0..7 of channel 0: positions 0..7, one value each of the T*K = 32 there
    np.testing.assert_allclose(place[:8, 0], 1 / (T * K))
    assert place[8:, 0].sum() == 0
    # capsule 4 straddles channels 0 and 1: positions 32..35 of the first, 0..3 of the second
    assert set(np.flatnonzero(place[:, 4])) == {0, 1, 2, 3, 32, 33, 34, 35}
    # a capsule coupled alone lights only the positions its values come from
    c = np.zeros((1, G * G * T, 3))
    c[0, 0, 1] = 1.0
    tr = trace(c, grouping="view", grid=G, types=T, dim=K)
    lit = tr.coupling_maps(0)[1].ravel()
    assert set(np.flatnonzero(lit)) == set(range(8))
    assert tr.by_capsule(c[0, :, 1]).shape == (T, G * G) and tr.by_capsule(c[0, :, 1])[0, 0] == 1.0
    title, caption = map_words(tr, 0, "digit capsule", "digit", True, 0, "0")
    assert "8 neighbouring values of one conv map" in caption and "no one position" in caption
    assert capsule_axes(tr) == ("capsule, 36 to a row", "row")
    labels = capsule_labels(tr)
    assert labels["hover"][1][0] == "capsule 37" and labels["x"][0] == 1 and labels["y"] == list(range(1, T + 1))


def classes_trace():
    return trace(softmax(np.random.default_rng(2).normal(size=(3, 12, 10)), -1))


def test_softmax_over_inputs_makes_uniform_one_over_I_and_entropy_over_the_inputs():
    rng = np.random.default_rng(1)
    c = softmax(rng.normal(size=(3, 12, 10)), 1)  # each class's couplings sum to 1 over the 12 inputs
    tr = trace(c, softmax="inputs")
    assert tr.uniform == pytest.approx(1 / 12) and tr.uniform_entropy == pytest.approx(np.log(12))
    assert tr.entropy.shape == (3, 10)
    fig = entropy_figure(tr, "digit capsule", "digit")
    assert "how evenly a digit capsule draws on the 12 primary capsules, its evenness: 100% is spread evenly" in fig["caption"]
    assert "1/12 from each" in fig["caption"] and "nats" not in fig["caption"] and "entropy" not in fig["title"]
    assert "draws a larger share of its input from that position" in map_words(tr, 1, "digit capsule", "digit", True, 0, "0")[1]
    maps = tr.coupling_maps(1)  # 1/12: four decimals, so the span shows
    assert f"{maps.min():.4f} to {maps.max():.4f} (uniform: {1 / 12:.4f})" in map_words(tr, 1, "c", "d", True, 0, "0")[1]
    assert "sends a larger share of its vote to that digit" in map_words(classes_trace(), 1, "digit capsule", "digit", True, 0, "0")[1]
    classes = trace(softmax(rng.normal(size=(3, 12, 10)), -1))
    assert classes.uniform == pytest.approx(0.1) and classes.entropy.shape == (3, 12)
    assert "1/10 to each digit" in entropy_figure(classes, "digit capsule", "digit")["caption"]


@pytest.mark.parametrize(
    "kept, word", [(rules.NEAR_UNIFORM_ENTROPY + 0.01, "near uniform"), (rules.NEAR_UNIFORM_ENTROPY - 0.01, "away from uniform")]
)
def test_entropy_words_call_the_last_iteration_near_uniform_by_the_rule(kept, word):
    J, I = 10, 6
    # couplings whose entropy is `kept` of log J: one class gets p, the others share the rest evenly

    def ratio(p):
        q = (1 - p) / (J - 1)
        return -(p * np.log(p) + (J - 1) * q * np.log(q)) / np.log(J)

    lo, hi = 0.1001, 0.999  # ratio falls from ~1 to ~0 on it: bisect for `kept`
    for _ in range(60):
        p = (lo + hi) / 2
        lo, hi = (p, hi) if ratio(p) > kept else (lo, p)
    row = np.full(J, (1 - p) / (J - 1))
    row[0] = p
    c = np.stack([np.full((I, J), 0.1), np.tile(row, (I, 1))])
    fig = entropy_figure(trace(c), "digit capsule", "digit")
    assert f"at iteration 2 its couplings are {word}" in fig["caption"]
    first, last = fig["series"][0, 0], fig["series"][-1, 0]
    assert first == pytest.approx(100) and last == pytest.approx(100 * kept)  # % of uniform, as drawn
    assert f"{first:.1f}% at iteration 1, {last:.1f}% at iteration 2" in fig["caption"]
    # both sides are within LEVEL of 100%: level by the trend rule, and the verdict is joined so both hold
    if word == "near uniform":
        assert "moves only a little (a change of 4.0%; 10% or less counts as level)" in fig["caption"]
        assert "; so at iteration 2 its couplings are near uniform" in fig["caption"]
    else:  # level, yet across the line: it says it fell a little, to below the line, so away by the rule
        assert "falls slightly, by 6.0 points (a change of 6.0%; 10% or less counts as level)" in fig["caption"]
        assert "ending below the 95% line, which it started above, so by the near-uniform rule at iteration 2" in fig["caption"]
        assert "moves only a little" not in fig["caption"] and "yet" not in fig["caption"]
    assert fig["y_range"] == (0.0, 105.0) and fig["line"] == pytest.approx(100 * rules.NEAR_UNIFORM_ENTROPY)


@pytest.mark.parametrize(
    "first, last, said",
    [
        # walk item 7: level by the trend rule, but just across the near-uniform line
        (100.0, 94.8, "falls slightly, by 5.2 points (a change of 5.2%; 10% or less counts as level): 100.0% at iteration 1, "
         "94.8% at iteration 10, ending below the 95% line, which it started above, so by the near-uniform rule at iteration 10 "
         "its couplings are away from uniform: their evenness is 94.8% (100% = spread evenly), not more than 95%."),
        (100.0, 95.2, "moves only a little (a change of 4.8%; 10% or less counts as level): 100.0% at iteration 1, 95.2% at "
         "iteration 10; so at iteration 10 its couplings are near uniform: their evenness is 95.2% (100% = spread evenly), more than 95%."),
        (90.0, 94.0, "rises slightly, by 4.0 points (a change of 4.3%; 10% or less counts as level): 90.0% at iteration 1, "
         "94.0% at iteration 10, below the 95% line, as at iteration 1, so by the near-uniform rule"),
        (100.0, 80.0, "falls by 20.0%: 100.0% at iteration 1, 80.0% at iteration 10; so at iteration 10 its couplings are away"),
        (80.0, 96.0, "rises by 16.7%: 80.0% at iteration 1, 96.0% at iteration 10; so at iteration 10 its couplings are near"),
        (50.0, 80.0, "rises by 37.5%: 50.0% at iteration 1, 80.0% at iteration 10; and at iteration 10 its couplings are away"),
    ],
)  # fmt: skip
def test_entropy_words_say_a_level_change_across_the_line_plainly(first, last, said):
    assert said in entropy_words(np.linspace(first, last, 10), 100 * rules.NEAR_UNIFORM_ENTROPY)


def test_entropy_words_say_a_dip_along_the_path():
    """A mean that dips in between and comes back is not called level (the peaks / dips rule)."""
    means = np.array([100.0, 70.0, 85.0, 97.0])
    said = entropy_words(means, 100 * rules.NEAR_UNIFORM_ENTROPY)
    assert "the mean falls to 70.0% at iteration 2, then rises: 100.0% at iteration 1, 97.0% at iteration 4;" in said
    assert "at iteration 4 its couplings are near uniform: their evenness is 97.0% (100% = spread evenly)" in said
    assert "stays" not in said and "moves only a little" not in said
    within = entropy_words(np.array([100.0, 92.0, 97.0]), 100 * rules.NEAR_UNIFORM_ENTROPY)  # 5 below 97: within 10%
    assert "then rises" not in within and "moves only a little" in within


def test_entropy_words_give_the_fall_and_verdict_that_both_hold():
    """The reported contradiction: "stays about level ... so the couplings end away from uniform"."""
    J, I = 10, 6
    row = np.full(J, 0.5 / (J - 1))
    row[0] = 0.5  # keeps well under 90% of log J: a fall beyond LEVEL
    c = np.stack([np.full((I, J), 0.1), np.tile(row, (I, 1))])
    fig = entropy_figure(trace(c), "digit capsule", "digit")
    last = fig["series"][-1, 0]
    assert f"the mean falls by {(100 - last) / 100:.1%}: 100.0% at iteration 1, {last:.1f}% at iteration 2; so at" in fig["caption"]
    assert "stays about level" not in fig["caption"] and "moves only a little" not in fig["caption"]


@pytest.mark.parametrize(
    "c_change, verb, how",
    [
        ([6.9e-4, 1.0e-3, 1.4e-3], "rises", "keep moving more"),  # the reported bug: the chart rises, the words said "settle"
        ([2.9e-3, 6.0e-3], "rises", "keep moving more"),
        ([1.4e-3, 6.9e-4], "falls", "settle"),
        ([1.0e-3, 1.0e-3 * (1 + rules.LEVEL / 2)], "stays about level", "keep moving about as much"),
    ],
)
def test_convergence_words_follow_the_chart(c_change, verb, how):
    """Monotone (or two-point) paths: the first-to-last rule."""
    b = np.array([0.02, 0.007, 0.004, 0.003, 0.002])
    said = convergence_words(b, np.array(c_change))
    assert f"c = softmax(b) {how}: their change per iteration {verb}" in said
    assert f"({c_change[0]:.1e} at iteration 2, {c_change[-1]:.1e} at iteration {len(c_change) + 1})" in said
    assert f"at iteration 2 is {b[1]:.4f} and at iteration 5 {b[4]:.4f} (it falls)" in said


def test_convergence_words_say_a_peak_in_the_change_of_c():
    """The reported path: the change in c doubles by iteration 5 and ends near its start; level by its
    ends alone, it is said to rise, then fall, with the peak the chart draws."""
    c_change = np.array([8.7e-3, 1.2e-2, 1.6e-2, 1.86e-2, 1.4e-2, 1.1e-2, 1.0e-2, 9.5e-3, 9.2e-3])
    assert rules.trend(c_change[0], c_change[-1]) == "stays about level"
    b = np.array([0.02, 0.007, 0.009, 0.002, 0.006])  # dips at iteration 4 (0.002), between 0.007 and 0.006
    said = convergence_words(b, c_change)
    assert "c = softmax(b) do not settle steadily: their change per iteration rises to 1.9e-02 at iteration 5, then falls" in said
    assert "rises to 1.9e-02 at iteration 5, then falls (8.7e-03 at iteration 2, 9.2e-03 at iteration 10)" in said
    assert "(it falls to 0.0020 at iteration 4, then rises)" in said


@pytest.mark.parametrize(
    "first, last, verb",
    [
        (0.3, 0.3 + rules.LEVEL + 0.01, "rises"),
        (0.3, 0.3 + rules.LEVEL - 0.01, "stays about level"),
        (0.3, 0.3 - rules.LEVEL - 0.01, "falls"),
        (0.907, 0.999, "stays about level"),  # the reported pair: +0.092 on a 0..1 scale, whatever the start
        (0.725, 0.945, "rises"),
        (0.05, 0.1, "stays about level"),  # doubles, but by 0.05 of the whole range: the old relative rule said "rises"
    ],
)
def test_length_words_say_the_winners_trend_by_the_bounded_rule(first, last, verb):
    lengths = np.array([[first, 0.01], [first, 0.01], [last, 0.01]])
    said = length_words(lengths, 0, "digit capsule", "digit", "7")
    assert f"the winner's length {verb}: {first:.3f} at iteration 1, {last:.3f} at iteration 3, a change of {last - first:+.3f}" in said
    assert f"more than {rules.LEVEL:.2f}" in said
    assert "nothing is shifted" in length_words(lengths[:1], 0, "digit capsule", "digit", "7")


@pytest.mark.parametrize(
    "share, word", [(0.1 * rules.NEAR_UNIFORM_SHARE - 0.01, "near uniform"), (0.1 * rules.NEAR_UNIFORM_SHARE + 0.01, "away from uniform")]
)
def test_summary_words_use_the_share_rule(share, word):
    cs = {
        "n_images": 64,
        "softmax": "classes",
        "uniform": 0.1,
        "coupling_to_prediction": [0.1, share],
        "vote_weighted_coupling_to_prediction": [0.1, share + 0.02],
        "entropy": [np.log(10), 0.99 * np.log(10)],
        "uniform_entropy": np.log(10),
    }
    said = summary_words(cs, 1, "dynamic routing, 3 iterations")
    assert f"at iteration 2 the couplings are {word}" in said
    assert f"At iteration 2, the count chosen above, a primary capsule sends on average {share:.3f}" in said
    assert f"{share:.3f} of its vote to the predicted class (uniform: 0.100); counting each vote by its length, {share + 0.02:.3f}" in said
    assert "trained with dynamic routing, 3 iterations" in said and "the one this model was trained with" not in said
    inputs = dict(cs, softmax="inputs", uniform=1 / 144, uniform_entropy=np.log(144), entropy=[np.log(144), 0.9 * np.log(144)])
    said = summary_words(inputs, 1, "x")
    assert "sum to 1 over the 144 input capsules" in said and "away from uniform" in said
    said = summary_words(cs, 0, "x")  # iteration 1: uniform by construction, not a measurement
    assert "at iteration 1 nothing has been routed yet, so the couplings are uniform by construction" in said


@pytest.mark.parametrize("weighted, says", [(0.149, False), (0.151, True), (0.218, True)])
def test_summary_words_say_the_long_votes_sentence_from_the_one_rule(weighted, says):
    """Walk N2 / N8: a 2.2x length-weighted share beside a near-uniform plain mean gets the one sentence
    (rules.long_votes_words), at the rule's factor and not below it; the verdict stays the plain mean's."""
    cs = {
        "n_images": 64,
        "softmax": "classes",
        "uniform": 0.1,
        "coupling_to_prediction": [0.1, 0.121],
        "vote_weighted_coupling_to_prediction": [0.1, weighted],
        "entropy": [np.log(10), 0.99 * np.log(10)],
        "uniform_entropy": np.log(10),
    }
    said = summary_words(cs, 1, "x")
    assert "the couplings are near uniform" in said and "the predicted class gets 0.12 on average, less than 1.5 times" in said
    sentence = f"Weighted by prediction length, the predicted class gets {weighted:.3f}, {weighted / 0.1:.1f} times uniform: routing moves mainly the capsules with long predictions."
    assert (sentence in said) == says
    assert ("routing moves" in said) == says


class Config:
    def __init__(self, couplings, n):
        self.couplings, self.routing_iterations = couplings, n


@pytest.mark.parametrize(
    "couplings, n, said",
    [
        ("dynamic", 3, "dynamic routing, 3 iterations"),
        ("dynamic", 1, "dynamic routing, 1 iteration (one pass"),
        ("random", 3, "fixed random couplings"),
        ("uniform", 3, "uniform couplings (no routing)"),
    ],
)
def test_what_a_model_was_trained_with_comes_from_its_config(couplings, n, said):
    """The reported contradiction: "trained with random couplings" above, "iteration 3, the one this
    model was trained with" below. Both now come from trained_with_words, which reads the config."""
    assert trained_with_words(Config(couplings, n)).startswith(said)
    if couplings != "dynamic":
        assert "iteration" not in trained_with_words(Config(couplings, n))


@pytest.mark.parametrize("prior, words", [(0.9, "counts as much as the routing"), (0.2, "the routing of this image weighs more")])
def test_attention_words_compare_the_prior_with_the_couplings(prior, words):
    I, J = 6, 4
    c = np.full((I, J), 0.25)
    c[:, 1] = 0.5
    c[:, [0, 2, 3]] = 0.5 / 3
    from capsviz.analysis import coupling_entropy

    tr = AttentionTrace(c, c, np.full((I, J), prior), np.ones(J), coupling_entropy(c), np.ones((I, J)))
    said = attention_words(tr, 1, "1")
    assert words in said and f"{prior:.2f}" in said and "0.50" in said
    assert "away from uniform" in said  # 0.50 is twice the uniform 0.25
    assert "near uniform" in attention_words(AttentionTrace(np.full((I, J), 0.25), c, c * 0, np.ones(J), np.full(I, np.log(J)), c), 1, "1")


def test_sweep_words_count_the_changed_predictions():
    assert "at 2 of 4 iteration counts" in sweep_words([1, 2, 1, 3], 1, "1")
    assert "stays 1" in sweep_words([1, 1], 1, "1")


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_models_captions_quote_the_numbers_their_charts_draw(path):
    model, meta = ckpt.load_checkpoint(path)
    if not registry.shows(meta.config, "routing"):
        pytest.skip(f"{path.stem}: no vector-capsule routing page")
    rng = np.random.default_rng(0)
    shape = (meta.config.in_size,) * 2 if meta.config.in_channels == 1 else (meta.config.in_channels, *(meta.config.in_size,) * 2)
    image = (rng.random(shape) * (rng.random(shape) > 0.7)).astype(np.float32)
    if registry.ROUTINGS[meta.config.routing].view == "attention":
        tr = attention_trace(model, image)
        winner = int(tr.lengths.argmax())
        said = attention_words(tr, winner, "x")
        assert f"{tr.c[:, winner].mean():.2f} of their vote" in said
        assert f"spans {tr.prior.min():.2f} to {tr.prior.max():.2f}" in said
        return
    T = 10
    tr = dynamic_trace(model, image, T)
    winner = int(tr.lengths[-1].argmax())
    maps = tr.coupling_maps(T - 1)
    for j in (winner, (winner + 1) % len(meta.class_names)):  # the class the detailed map shows, whichever is chosen
        _, caption = map_words(tr, T - 1, "digit capsule", "digit", True, j, "x")
        assert f"{maps.min():.3f} to {maps.max():.3f} (uniform: {tr.uniform:.3f})" in caption
        assert ("exaggerate" in caption) == rules.small_span(float(maps.min()), float(maps.max()), tr.uniform)
        ratios = f"from {times(maps.min() / tr.uniform)} to {times(maps.max() / tr.uniform)} times uniform"
        assert (ratios in caption) != ("exaggerate" in caption)
        assert f"the x map spans {maps[j].min():.3f} to {maps[j].max():.3f}" in caption  # the small map of class j
        z = tr.by_capsule(tr.c[T - 1, :, j])  # what the detailed heatmap draws
        assert f"single primary capsules span {z.min():.3f} to {z.max():.3f} at this iteration" in caption
    _, caption = detail_words(tr, T - 1, winner, "x")
    assert f"{tr.c[T - 1, :, winner].min():.3f} to {tr.c[T - 1, :, winner].max():.3f}" in caption
    said = length_words(tr.lengths, winner, "digit capsule", "digit", "x")
    assert f"{tr.lengths[0, winner]:.3f} at iteration 1, {tr.lengths[-1, winner]:.3f} at iteration {T}" in said
    assert f"length {rules.path_trend(tr.lengths[:, winner], '{:.3f}', bounded=True)}:" in said
    fig = entropy_figure(tr, "digit capsule", "digit")
    first, last = fig["series"][0, 0], fig["series"][-1, 0]
    assert last == pytest.approx(100 * tr.entropy[-1].mean() / tr.uniform_entropy)
    assert f"{first:.1f}% at iteration 1, {last:.1f}% at iteration {T}" in fig["caption"]
    assert rule_words.uniform_words(last / 100) in fig["caption"]
    sweep = iteration_sweep(model, image, T)
    said = dynamic_sweep_words(sweep["lengths"], sweep["predictions"], T, [str(n) for n in meta.class_names], "digit capsule")
    p = sweep["predictions"][-1]
    assert p == winner and f"the prediction is {meta.class_names[p]} (length {sweep['lengths'][-1, p]:.3f})" in said
    said = convergence_words(tr.b_change, tr.c_change)
    assert f"at iteration 2 is {tr.b_change[1]:.4f} and at iteration 5 {tr.b_change[4]:.4f}" in said
    assert f"({tr.c_change[0]:.1e} at iteration 2, {tr.c_change[-1]:.1e} at iteration {T})" in said
    assert f"per iteration {rules.path_trend(tr.c_change, '{:.1e}', start=2)}" in said
    if rules.turn(tr.c_change) is not None:  # the peak or dip quoted is the chart's own value there
        k = rules.turn(tr.c_change)
        assert f"{tr.c_change[k]:.1e} at iteration {k + 2}" in said
    cs = coupling_summary(model, torch.from_numpy(np.stack([image, image[::-1].copy()])), T)
    for k in (meta.config.routing_iterations - 1, T - 1):
        said = summary_words(cs, k, trained_with_words(meta.config))
        assert f"At iteration {k + 1}, the count chosen above" in said and f"trained with {trained_with_words(meta.config)}" in said
        assert f"{cs['coupling_to_prediction'][k]:.3f} of its vote" in said
        assert f"by its length, {cs['vote_weighted_coupling_to_prediction'][k]:.3f}" in said
        weighted, share = cs["vote_weighted_coupling_to_prediction"][k], cs["coupling_to_prediction"][k]
        if k > 0:  # the plain mean decides; at iteration 1 the couplings are uniform by construction
            assert rule_words.uniform_words(cs["entropy"][k] / cs["uniform_entropy"], share, cs["uniform"]) in said
        long = rule_words.long_votes_words("the predicted class", weighted, cs["uniform"], share)
        assert (long in said) if rules.long_votes_move(weighted, cs["uniform"]) else ("Weighted by prediction length" not in said)


def test_map_caption_says_exaggerate_only_for_a_small_span_and_that_the_maps_average():
    u = 0.1
    T, G, K, J = 2, 2, 3, 10
    c = np.full((T, G * G * K, J), u)
    inside = c.copy()
    inside[1, :, 0], inside[1, :, 1] = u * (rules.NEAR_UNIFORM_SHARE - 0.05), u / rules.NEAR_UNIFORM_SHARE + 0.005
    _, said = map_words(trace(inside, grid=G, types=K), 1, "digit capsule", "digit", True, 0, "0")
    assert "span only" in said and "exaggerate small differences" in said
    outside = c.copy()
    outside[1, 0, 0], outside[1, 0, 1] = 0.7, 0.0  # one capsule far from uniform: the averaged square too
    outside[1, 0, 2:] = 0.3 / 8
    tr = trace(outside, grid=G, types=K)
    maps = tr.coupling_maps(1)
    assert not rules.small_span(float(maps.min()), float(maps.max()), u)
    _, said = map_words(tr, 1, "digit capsule", "digit", True, 0, "0")
    assert "exaggerate" not in said and "span only" not in said
    assert f"span {maps.min():.3f} to {maps.max():.3f} (uniform: 0.100), from {maps.min() / u:.1f} to {maps.max() / u:.1f} times" in said
    assert "These are averages: the 0 map spans" in said
    assert f"the 0 map spans {maps[0].min():.3f} to {maps[0].max():.3f}, while its single primary capsules span 0.100 to 0.700" in said
    _, said = map_words(tr, 1, "digit capsule", "digit", True, 1, "1")  # the detailed map's class, not all of them
    assert "single primary capsules span 0.000 to 0.100" in said
    _, detail = detail_words(tr, 1, 0, "0")
    assert "span 0.100 to 0.700 (uniform: 0.100), from 1.0 to 7.0 times uniform" in detail and "1 = row 1, col 1" in detail


def test_one_iteration_says_only_the_coupling_maps_are_flat():
    said = once_words(classes_trace())
    assert "the coupling maps below are flat" in said and "agreement map further down is not" in said


def test_detailed_maps_count_positions_from_1_as_the_tour_names_them():
    tr = trace(softmax(np.random.default_rng(3).normal(size=(1, 3 * 3 * 4, 10)), -1), grid=3, types=4, dim=4)
    labels = capsule_labels(tr)
    values = tr.by_capsule(tr.c[0, :, 2])
    # capsule i = position * types + type; position 5 is row 2, col 3 (from 1) on the 3x3 grid
    i = 5 * 4 + 3
    assert labels["hover"][3][5] == "type 4 at row 2, col 3" and values[3, 5] == tr.c[0, i, 2]
    assert labels["x"] == list(range(1, 10)) and labels["y"] == [1, 2, 3, 4]


def test_coupling_maps_hover_counts_rows_and_columns_from_1():
    from capsviz.viz import class_maps

    fig = class_maps(np.zeros((2, 3, 3)), ["a", "b"], "t")
    cell = fig.data[0].customdata
    assert list(cell[0, 0]) == ["a", 1, 1] and list(cell[2, 6]) == ["b", 3, 3]


@pytest.mark.parametrize(
    "predictions, said", [([1, 1, 1], "It is 1 with every count from 1 to 3."), ([2, 1, 1], "differs at 1 of 3 counts: 1 (2).")]
)
def test_sweep_caption_for_dynamic_models_names_the_counts_that_change_the_prediction(predictions, said):
    lengths = np.full((3, 3), 0.2)
    lengths[np.arange(3), predictions] = [0.9, 0.8, 0.7]
    text = dynamic_sweep_words(lengths, predictions, 3, ["0", "1", "2"], "digit capsule")
    assert said in text and "the prediction is 1 (length 0.700)" in text


@pytest.mark.parametrize(
    "first, last, verb",
    [
        (0.5, 0.5 + rules.LEVEL + 0.001, "rises"),
        (0.5, 0.5 + rules.LEVEL - 0.001, "stays about level"),
        (0.5, 0.5 - rules.LEVEL - 0.001, "falls"),
    ],
)
def test_bounded_trend_takes_level_of_the_whole_range(first, last, verb):
    assert rules.bounded_trend(first, last) == verb


@pytest.mark.parametrize(
    "lo, hi, small",
    [
        (0.1 / rules.NEAR_UNIFORM_SHARE + 0.001, 0.1 * rules.NEAR_UNIFORM_SHARE - 0.001, True),
        (0.1 / rules.NEAR_UNIFORM_SHARE + 0.001, 0.1 * rules.NEAR_UNIFORM_SHARE + 0.001, False),  # the top too far
        (0.1 / rules.NEAR_UNIFORM_SHARE - 0.001, 0.1 * rules.NEAR_UNIFORM_SHARE - 0.001, False),  # the bottom too far
        (0.018, 0.621, False),  # the reported span, 6.2x uniform, called "only ... small differences"
    ],
)
def test_small_span_rule(lo, hi, small):
    assert rules.small_span(lo, hi, 0.1) is small
    assert ("exaggerate" in rules.RULES["small span"]) and f"{rules.NEAR_UNIFORM_SHARE}" in rules.RULES["small span"]


@pytest.mark.parametrize(
    "ratio, said", [(0.04, "0.04"), (0.0004, "0.0004"), (0.096, "0.10"), (0.5, "0.5"), (10.0, "10.0"), (0.0, "0.0"), (0.1, "0.1")]
)
def test_ratios_are_quoted_non_zero_when_they_are_not_zero(ratio, said):
    assert times(ratio) == said


def test_span_words_quote_a_small_low_end_as_non_zero():
    """The reported one-iteration model at 10 iterations: 0.004 to 1.000 read "from 0.0 to 10.0 times uniform"."""
    said = span_words(0.004, 1.0, 0.1, 3)
    assert "the squares span 0.004 to 1.000 (uniform: 0.100), from 0.04 to 10.0 times uniform" in said


@pytest.mark.parametrize(
    "path, verb",
    [
        ([0.3, 0.3 + rules.LEVEL + 0.05, 0.32], f"rises to {0.3 + rules.LEVEL + 0.05:.3f} at iteration 2, then falls"),
        ([0.5, 0.5 - rules.LEVEL - 0.05, 0.48], f"falls to {0.5 - rules.LEVEL - 0.05:.3f} at iteration 2, then rises"),
        ([0.3, 0.3 + rules.LEVEL - 0.01, 0.3], "stays about level"),  # the bump within LEVEL: no turn
        ([0.3, 0.4, 0.3 + rules.LEVEL + 0.05], "rises"),
    ],
)
def test_length_words_read_the_winners_whole_path(path, verb):
    lengths = np.stack([np.array(path), np.full(3, 0.01)], 1)
    said = length_words(lengths, 0, "digit capsule", "digit", "7")
    assert f"the winner's length {verb}: {path[0]:.3f} at iteration 1, {path[-1]:.3f} at iteration 3" in said


def test_canvas_words_say_the_model_was_trained_on_training_digits():
    said = canvas_words(36, 4)
    assert "trained on MultiMNIST: two training digits overlapping on a 36x36 canvas" in said
    assert "two test digits" not in said


def test_capsules_on_no_grid_are_said_one_by_one_with_the_span_the_heatmap_draws():
    rng = np.random.default_rng(4)
    c = softmax(rng.normal(size=(3, 7, 5)), -1)
    c[0] = 1 / 5  # iteration 1: nothing routed yet
    tr = trace(c, layout=Layout(0, 4))
    title, said = unplaced_words(tr, 0, "digit capsule", "digit")
    assert title == "Iteration 1: couplings c" and "every coupling is 0.200: nothing has been routed yet" in said
    assert "Each column is one of the 7 primary capsules" in said
    _, said = unplaced_words(tr, 2, "digit capsule", "digit")
    assert f"{c[2].min():.3f} to {c[2].max():.3f} (uniform: 0.200)" in said and "vote to that digit" in said
    inputs = trace(c, softmax="inputs", layout=Layout(0, 4))
    assert "draws a larger share of its input" in unplaced_words(inputs, 2, "digit capsule", "digit")[1]


def test_a_family_without_a_choice_of_couplings_is_said_to_be_trained_with_its_own_routing():
    assert trained_with_words(preset("efficient-capsnet")) == "self-attention routing (one pass)"
