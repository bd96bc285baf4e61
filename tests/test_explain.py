"""The core behind the EM, explorer and MultiMNIST pages' words and figures (capsviz.analysis.explain,
capsviz.viz.explain): zoom limits that are the ones stated, positions and labels in words, the
couplings of a pair's winners beside a single digit, and the images and GIF they draw."""

import io
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from synthetic import synthetic_digits

from capsviz import checkpoint as ckpt
from capsviz.analysis import STEPS, rule_words, rules
from capsviz.analysis.explain import (
    PAPER_ZOOM,
    EMShares,
    PairRouting,
    capsule_role,
    conv_assignment_words,
    distance_words,
    em_share_words,
    em_shares,
    pair_routing,
    pair_routing_title,
    pair_routing_words,
    pair_words,
    panel_order,
    peak_words,
    position_words,
    reconstruction_words,
    round_up,
    verdict_words,
    zoom_limit,
)
from capsviz.analysis.multimnist import INK_LEVEL, compose_pair, ink_under
from capsviz.analysis.routing import EMTrace, dynamic_trace, em_trace, vote_histograms
from capsviz.config import preset
from capsviz.models import build_model
from capsviz.registry import routing_words
from capsviz.viz.animation import gif_bytes
from capsviz.viz.explain import WINNER, coupling_overlays, em_histogram_frames, histogram_panels, labelled_grid

ROOT = Path(__file__).resolve().parents[1]
IMAGE = np.random.default_rng(0).random((28, 28)).astype(np.float32)


@pytest.fixture(scope="module")
def matrix():
    torch.manual_seed(0)
    return build_model(preset("matrix-small", in_size=28, num_classes=10, A=8, B=4, C=4, D=4)).eval()


@pytest.fixture(scope="module")
def pair_model():
    torch.manual_seed(0)
    return build_model(preset("capsnet-small", in_size=36, conv1_channels=16, primary_types=4)).eval()


@pytest.fixture(scope="module")
def pair():
    images, labels = synthetic_digits(40, 0)
    images, labels = torch.from_numpy(images), torch.from_numpy(labels).long()
    second = next(k for k in range(1, 40) if labels[k] != labels[0])
    return compose_pair(images, labels, 0, second, [[1, -2], [-3, 2]])


@pytest.mark.parametrize(("x", "want"), [(0.01234, 0.013), (1.7, 1.7), (1.70001, 1.8), (28.3, 29.0), (0.05, 0.05), (0.0, 0.0)])
def test_round_up_holds_x_and_prints_as_the_rounded_number(x, want):
    assert round_up(x) == want and round_up(x) >= x
    assert f"{round_up(x):g}" == f"{want:g}"


def test_zoom_uses_the_papers_limit_only_where_it_holds_votes():
    rng = np.random.default_rng(0)
    far = rng.uniform(0.5, 30, (3, 200, 10))
    z = zoom_limit(far, True)
    assert z.limit != PAPER_ZOOM and "none of this model's votes" in z.why
    assert 0.10 <= z.share <= 0.12  # the nearest 10%, rounded up
    near = far.copy()
    near[:, :10] = 0.01  # 5% of the votes within 0.05
    z = zoom_limit(near, True)
    assert z.limit == PAPER_ZOOM and z.share == pytest.approx(0.05) and "paper's zoom" in z.why
    full = zoom_limit(far, False)
    assert full.limit > z.limit and full.share >= 0.99


def test_the_stated_limit_is_the_range_the_histograms_count(matrix):
    """The page states `zoom.limit`; the histograms hold exactly the votes within it."""
    tr = em_trace(matrix, IMAGE, 3)
    for zoom in (True, False):
        z = zoom_limit(tr.distances, zoom)
        counts = vote_histograms(tr, np.linspace(0, z.limit, 41))  # (T, J, 40)
        inside = np.where(tr.distances <= z.limit, tr.R, 0).sum(1)  # (T, J)
        np.testing.assert_allclose(counts.sum(-1), inside, rtol=1e-5, atol=1e-6)
        assert z.share == pytest.approx(float((tr.distances <= z.limit).mean()))


def test_panels_put_the_winner_first_and_shares_start_uniform(matrix):
    tr = em_trace(matrix, IMAGE, 3)
    order = panel_order(tr.a[-1])
    assert order[0] == int(tr.a[-1].argmax()) and sorted(order) == list(range(10))
    assert all(tr.a[-1][order[k]] >= tr.a[-1][order[k + 1]] for k in range(9))
    sh = em_shares(tr)
    assert sh.winner == order[0]
    assert sh.share[0] == pytest.approx(0.1, abs=1e-5)  # the first M-step uses R = 1/10
    np.testing.assert_allclose(sh.share, tr.R[:, :, sh.winner].sum(1) / tr.R.shape[1], rtol=1e-6)
    # the winner's R-weighted mean distance, by a plain loop over the lower capsules
    w, t = sh.winner, 2
    num = sum(tr.R[t, i, w] * tr.distances[t, i, w] for i in range(tr.R.shape[1]))
    assert sh.near[t] == pytest.approx(num / tr.R[t, :, w].sum(), rel=1e-5)


def test_em_shares_on_a_hand_made_trace():
    R = np.full((2, 4, 2), 0.5)
    R[1] = [[1, 0], [1, 0], [0, 1], [1, 0]]
    distances = np.ones((2, 4, 2))
    distances[1, :, 0] = 0.2
    tr = EMTrace(R, np.array([[0.5, 0.5], [0.9, 0.1]]), None, None, None, distances, {})
    sh = em_shares(tr)
    assert sh.winner == 0 and sh.uniform == 0.5
    np.testing.assert_allclose(sh.share, [0.5, 0.75])
    np.testing.assert_allclose(sh.near, [1.0, 0.2])
    np.testing.assert_allclose(sh.near_others, [1.0, 1.0])


def test_positions_and_labels_in_words():
    assert position_words(0, 6) == "row 1, column 1 of the 6 x 6 grid"
    assert position_words(14, 6) == "row 3, column 3 of the 6 x 6 grid"
    assert position_words(35, 6) == "row 6, column 6 of the 6 x 6 grid"
    with pytest.raises(ValueError, match="outside the 6 x 6 grid"):
        position_words(36, 6)
    assert pair_words(7, 2) == "labels 7 and 2"
    assert capsule_role(0, (7, 2), (2, 7)) == "neither a label nor predicted"
    assert capsule_role(7, (7, 2), (7, 3)) == "a label, predicted"
    assert capsule_role(2, (7, 2), (7, 3)) == "a label, not predicted"
    assert capsule_role(3, (7, 2), (7, 3)) == "predicted, not a label"
    assert (
        reconstruction_words(2, 0, (7, 2), (7, 2))
        == "red: capsule 2 (a label, predicted), green: capsule 0 (neither a label nor predicted)"
    )


def test_pair_routing_is_dynamic_traces_couplings(pair_model, pair):
    T = 3
    r = pair_routing(pair_model, pair.image, pair.parts[0], (4, 1), T)
    G = pair_model.config.primary_grid
    assert r.maps.shape == (2, T, 2, G, G) and r.mean.shape == r.weighted.shape == r.peak.shape == (2, T, 2)
    # iteration 1 is uniform by definition, over every primary capsule
    np.testing.assert_allclose(r.mean[:, 0], 0.1, rtol=1e-5)
    np.testing.assert_allclose(r.weighted[:, 0], 0.1, rtol=1e-5)
    for k, image in enumerate((pair.image, pair.parts[0])):
        tr = dynamic_trace(pair_model, image, T)
        np.testing.assert_allclose(r.maps[k, 2, 0], tr.coupling_maps(2)[4], rtol=1e-6)
        np.testing.assert_allclose(r.mean[k, 2], tr.c[2, :, [4, 1]].mean(1), rtol=1e-6)
        np.testing.assert_allclose(r.lengths[k], tr.lengths[-1], rtol=1e-6)
        # the length-weighted coupling, by a plain loop over the primary capsules
        with torch.no_grad():
            vote = pair_model.predictions(torch.tensor(image).view(1, 1, 36, 36))[0, 1].norm(dim=-1).numpy()  # (I,)
        num = sum(tr.c[2, i, 1] * vote[i] for i in range(len(vote)))
        assert r.weighted[k, 2, 1] == pytest.approx(num / vote.sum(), rel=1e-5)
    assert np.abs(r.maps[0, -1] - r.maps[1, -1]).max() > 0  # the second digit changes the couplings (an untrained model: a little)
    assert r.peak_at.shape == (2,) and (r.peak_vote > 0).all()


def _fake(
    mean_move: float,
    weighted_move: float,
    T: int = 3,
    entropy_ratio: float = 1.0,
    single_move: float = 0.0,
    ink: float = 0.0,
    single_mean_move: float = 0.0,
) -> PairRouting:
    """Couplings of 0.1 (uniform) everywhere but the last iteration: the pair's plain means move by
    mean_move, its length-weighted mean to capsule 7 by weighted_move, the single digit's length-
    weighted mean to capsule 2 by single_move and its plain means by single_mean_move; the earlier
    iterations and the maps move far (0.4), numbers the words must not quote."""
    mean = np.full((2, T, 2), 0.1)
    weighted = np.full((2, T, 2), 0.1)
    mean[0, -1] += mean_move
    mean[1, -1] += single_mean_move
    weighted[0, -1, 0] += weighted_move
    weighted[1, -1, 1] += single_move
    if T > 1:
        mean[:, 0] = weighted[:, 0] = 0.4  # an iteration not quoted
    return PairRouting(
        (7, 2),
        np.full((2, T, 2, 6, 6), 0.4),
        mean,
        weighted,
        np.full((2, T, 2), 0.4),
        np.zeros((2, 10)),
        0.1,
        np.array([0, 35]),
        np.array([0.5, 2.0]),
        np.array([ink, ink]),
        np.array([entropy_ratio, 1.0]),
    )


LONG = "routing moves mainly the capsules with long predictions"


def test_pair_routing_words_follow_the_numbers():
    """Near uniform by capsviz.analysis.rules, from the plain means (the predicted classes', as on
    /routing and in the lab), for the pair from the pair's own numbers at the last iteration (never
    the single digit's, another iteration's or the maps'), and for the single digit from its own: the
    plain share on both sides of NEAR_UNIFORM_SHARE times uniform, the entropy on both sides of
    NEAR_UNIFORM_ENTROPY; a length-weighted share at least that factor gets the long-votes sentence."""
    below = 0.1 * rules.NEAR_UNIFORM_SHARE - 0.1 - 0.001  # the move that keeps a share just under the rule's factor
    above = 0.1 * rules.NEAR_UNIFORM_SHARE - 0.1 + 0.001
    # walk N2: a 1.8x length-weighted share beside a plain 0.101 is near uniform, with the long-votes sentence
    n2 = pair_routing_words(_fake(0.001, 0.084), "the 1")
    assert (
        "over the pair the couplings are near uniform: their evenness is 100.0% (100% = spread evenly over all 10 classes), more than 95%, "
        "and the predicted class gets 0.10 on average, less than 1.5 times the uniform 0.10 (the larger of the pair's two plain averages above)"
        in n2
    )
    assert "routing barely reassigns most primary capsules between the two digits. " in n2
    assert f"Weighted by prediction length, capsule 7 gets 0.184, 1.8 times uniform: {LONG}." in n2
    assert rule_words.long_votes_words("capsule 7", 0.184, 0.1, 0.101) in n2 and "away from uniform" not in n2
    # the weighted share just under the factor: no such sentence, and routing barely reassigns the capsules
    quiet = pair_routing_words(_fake(0.001, below), "the 7")
    assert "routing barely reassigns the primary capsules between the two digits, so" in quiet and "Weighted by" not in quiet
    assert pair_routing_words(_fake(0.001, above), "the 7").count(LONG) == 1
    # the single digit far from uniform does not make the pair so, and each says its own long votes
    still = pair_routing_words(_fake(0.001, below, single_move=0.09, single_mean_move=0.09), "the 7")
    assert "over the pair the couplings are near uniform" in still and "0.101 of its prediction to capsule 7" in still
    assert (
        "The 7 alone, by its own numbers: its couplings are away from uniform: their evenness is 100.0% (100% = spread evenly over all 10 classes), "
        "more than 95%, but the predicted class gets 0.19 on average, at least 1.5 times the uniform 0.10 (the larger of its two plain averages)."
        in still
    )
    assert "Weighted by prediction length, capsule 2 gets 0.190, 1.9 times uniform, and the plain mean, 0.190, is 1.9 times" in still
    assert "gets 0.40" not in still  # the earlier iteration and the maps' peaks are not a verdict's share
    # the single digit's long votes alone: its plain mean stays near, its sentence is said after its verdict
    single_long = pair_routing_words(_fake(0.001, below, single_move=above), "the 7")
    assert "The 7 alone, by its own numbers: its couplings are near uniform" in single_long
    assert single_long.count(LONG) == 1 and "capsule 2 gets 0.151, 1.5 times uniform" in single_long
    # the plain share on either side of the factor decides the pair's verdict, whatever the weighted one
    assert "pair the couplings are near uniform" in pair_routing_words(_fake(below, 0.09), "the 7")
    away = pair_routing_words(_fake(above, 0.09), "the 7")
    assert (
        "pair the couplings are away from uniform: their evenness is 100.0% (100% = spread evenly over all 10 classes), more than 95%, but "
        "the predicted class gets 0.15" in away
    )
    assert "The 7 alone, by its own numbers: its couplings are near uniform" in away
    # the plain averages quoted are the pair's shown ones, at the shown iteration
    assert "the plain averages are at most 0.051 from uniform and the length-weighted ones at most 0.090" in away
    assert "move more" not in away.split("Weighted by")[0]  # the long votes are said once, by the rule's sentence
    assert "capsule 7 gets 0.190, 1.9 times uniform, and the plain mean, 0.151, is 1.5 times" in away and LONG not in away
    assert "capsule 7: 0.190 in the pair, 0.100 alone, so the other digit's presence raises it" in away
    flat_but_low_entropy = pair_routing_words(_fake(0.001, 0.01, entropy_ratio=rules.NEAR_UNIFORM_ENTROPY - 0.01), "the 7")
    assert "pair the couplings are away from uniform: their evenness is 94.0%" in flat_but_low_entropy
    assert "The 7 alone sends on average 0.100 and 0.100 to capsules 7 and 2; counted by length, 0.100 and 0.100." in away
    assert "row 1, column 1 of the 6 x 6 grid" in away and "0.5 times as long" in away and "carry little" in away
    once = pair_routing_words(_fake(0.0, 0.0, T=1), "the 2")
    assert "uniform 1/10 by definition" in once and "1 iteration " in once
    assert r_uniform_words_used(once) is False  # one iteration: no verdict, nothing has moved


@pytest.mark.parametrize("ink", [0.0, 0.25])
def test_the_brightest_square_says_whether_it_lies_on_the_ink(ink):
    """The brightest square (capsule 7's at position 0 here, its predictions half as long as the average;
    capsule 2's at position 35, twice as long) is called background agreeing when no pixel under it is ink."""
    r = _fake(0.001, 0.09, ink=ink)
    r.peak[0, -1] = [0.1, 0.3]  # capsule 2 is the brighter: position 35, long predictions
    said = peak_words(r)
    assert "brightest square for capsule 2 over the pair (0.300) is at row 6, column 6 of the 6 x 6 grid" in said
    assert "2.0 times as long" in said and "does change the digit capsule's input" in said
    if ink == 0:
        assert "off the digits' ink (none of the input's pixels under that square is above 0.1)" in said
        assert "happen to agree with capsule 2, not that ink is there" in said and "from background rather than" in said
    else:
        assert "on the digits' ink (25% of the input's pixels under that square are above 0.1)" in said
        assert "off the digits' ink" not in said and "background" not in said
    assert said in pair_routing_words(r, "the 7")


def test_ink_under_counts_the_pixels_nearest_each_square():
    image = np.zeros((36, 36), np.float32)
    image[-3:, -3:] = 1.0  # a blot in the bottom-right corner
    assert ink_under(image, 99, 10) == pytest.approx(9 / 16)  # the last of 10 squares covers rows 32 to 35 (4 px)
    assert ink_under(image, 0, 10) == 0.0 and ink_under(image, 98, 10) == 0.0
    image[0, 0] = INK_LEVEL  # at the threshold, not above it: not ink
    assert ink_under(image, 0, 10) == 0.0


def r_uniform_words_used(text: str) -> bool:
    return "near uniform" in text or "away from uniform" in text


def test_histogram_panels_highlight_the_winner_on_one_scale(matrix):
    tr = em_trace(matrix, IMAGE, 3)
    z = zoom_limit(tr.distances, False)
    frames = em_histogram_frames(tr, z.limit, [str(k) for k in range(10)])
    assert len(frames) == 3 and len({f.size for f in frames}) == 1
    one = em_histogram_frames(tr, z.limit, [str(k) for k in range(10)], it=1)[0]
    assert np.array_equal(np.asarray(one), np.asarray(frames[1]))
    counts = np.zeros((10, 4))
    counts[3] = [4, 2, 0, 0]
    img = np.asarray(histogram_panels(counts, 1.0, list("0123456789"), [3, *range(3), *range(4, 10)], "t", ["n"] * 10, 4.0))
    red = (img == WINNER).all(-1)
    assert red[:, :250].sum() > 1000 and red[:, 250:].sum() < 50  # the winner's panel (first) is the red one
    gif = Image.open(io.BytesIO(gif_bytes(frames)))
    assert gif.format == "GIF" and gif.n_frames == 3
    first = np.asarray(gif.convert("RGB"))
    gif.seek(2)
    assert not np.array_equal(first, np.asarray(gif.convert("RGB")))  # the assignments moved


def test_labelled_grid_names_rows_and_columns():
    grid = np.zeros((16, 11, 28, 28), np.float32)
    grid[3, 5] = 1.0
    rows, cols = [f"d{d}" for d in range(16)], [f"{s:+.2f}" for s in STEPS]
    img = np.asarray(labelled_grid(grid, rows, cols, scale=2, gap=2).convert("L"))
    left = img.shape[1] - 6 - 11 * 58
    top = np.flatnonzero(img[:, left + 2] == 0)[0]  # the first row of tiles (black: all zero but one)
    assert (img[top:, : left - 2] < 128).any() and (img[: top - 2, left:] < 128).any()  # labels drawn left and on top
    y, x = top + 3 * 58 + 28, left + 5 * 58 + 28  # the centre of tile (d3, 0.00)
    assert img[y, x] == 255 and img[y, x + 58] == 0


def test_coupling_overlays_use_one_stated_scale():
    image = np.zeros((36, 36), np.float32)
    maps = np.full((2, 2, 3, 6, 6), 0.1)
    maps[0, 0, 2] = 0.2
    img = np.asarray(coupling_overlays([image, image], maps, ["pair", "alone"], ["to 7", "to 2"], 0.1, 0.2, "t", scale=4))
    tile = lambda k, r, t: img[82 + r * 152 + 72, 110 + k * (3 * 152 + 24) + t * 152 + 72]  # noqa: E731 - centre pixel
    assert tuple(tile(0, 0, 2)) == (255, 0, 0)  # at the top of the scale: full red
    assert tuple(tile(0, 0, 1)) == (0, 0, 0) and tuple(tile(1, 1, 2)) == (0, 0, 0)  # uniform: no red


@pytest.mark.parametrize("last, verb", [(0.2, "rises"), (0.105, "stays about level"), (0.05, "falls")])
def test_em_share_words_follow_the_winners_share(last, verb):
    sh = EMShares(3, np.array([0.1, 0.1, last]), np.array([1.0, 0.8, 0.4]), np.array([1.0, 1.0, 0.9]), 0.1)
    said = em_share_words(sh, "3", trained=3)
    assert f"Its share of all assignment {verb}: 10.0% at iteration 1 (uniform: 10.0%), {last:.1%} at iteration 3" in said
    assert "lie on average 0.4 from its mean pose, nearer to it than the votes the other classes explain are to theirs (0.9)" in said
    assert "trained with" not in said
    far = EMShares(3, np.array([0.1, last]), np.array([1.0, 1.2]), np.array([1.0, 0.9]), 0.1)
    said = em_share_words(far, "3", trained=3)
    assert "1.2 from its mean pose, farther from it" in said and "trained with 3 EM iterations; with 2" in said
    once = em_share_words(EMShares(3, np.array([0.1]), np.array([1.0]), np.array([1.0]), 0.1), "3", trained=1)
    assert "stays at the uniform 10.0%, since one iteration re-assigns nothing" in once and "as near to it" in once


def test_em_words_quote_the_shipped_matrix_models_numbers():
    for path in sorted((ROOT / "checkpoints").glob("matrix-*.safetensors")):
        model, meta = ckpt.load_checkpoint(path)
        tr = em_trace(model, IMAGE, 3)
        sh = em_shares(tr)
        said = em_share_words(sh, "x", meta.config.routing_iterations)
        first, last = float(tr.R[0, :, sh.winner].sum() / tr.R.shape[1]), float(tr.R[-1, :, sh.winner].sum() / tr.R.shape[1])
        share = tr.R[:, :, sh.winner].sum(1) / tr.R.shape[1]  # the winner's share at each iteration, as em_shares gives it
        verb = rules.path_trend(share, "{:.1%}")
        assert f"{verb}: {first:.1%} at iteration 1 (uniform: {1 / tr.R.shape[2]:.1%}), {last:.1%} at iteration 3" in said
        if (k := rules.turn(share)) is not None:  # a peak or dip is quoted as the share at that iteration
            assert f"{share[k]:.1%} at iteration {k + 1}, then" in said
        assert f"lie on average {sh.near[-1]:.3g} from its mean pose" in said and f"({sh.near_others[-1]:.3g})" in said


def test_pair_routing_words_quote_the_shipped_multimnist_models_numbers():
    """The MultiMNIST page's routing sentences, for every shipped MultiMNIST model, quote the numbers
    pair_routing gives the figure (the maps are dynamic_trace's, the shares their means)."""
    rng = np.random.default_rng(0)
    single = (rng.random((36, 36)) * (rng.random((36, 36)) > 0.8)).astype(np.float32)
    pair = np.clip(single + (rng.random((36, 36)) * (rng.random((36, 36)) > 0.8)), 0, 1).astype(np.float32)
    paths = sorted((ROOT / "checkpoints").glob("*multimnist.safetensors"))
    assert paths
    for path in paths:
        model, meta = ckpt.load_checkpoint(path)
        T = meta.config.routing_iterations
        r = pair_routing(model, pair, single, (3, 5), T)
        said = pair_routing_words(r, "the 3")
        assert f"{r.mean[0, -1, 0]:.3f} of its prediction to capsule 3 and {r.mean[0, -1, 1]:.3f} to capsule 5" in said
        assert f"{r.weighted[0, -1, 0]:.3f} and {r.weighted[0, -1, 1]:.3f}." in said
        assert f"counted by length, {r.weighted[1, -1, 0]:.3f} and {r.weighted[1, -1, 1]:.3f}" in said
        assert f"alone sends on average {r.mean[1, -1, 0]:.3f} and {r.mean[1, -1, 1]:.3f}" in said
        if T > 1:
            # each verdict from its own input's numbers at the last iteration, the ones quoted above
            for k, image in enumerate((pair, single)):
                tr = dynamic_trace(model, image, T)
                assert r.entropy[k] == pytest.approx(tr.entropy[-1].mean() / tr.uniform_entropy)
                share = r.mean[k, -1].max()  # the plain mean decides, as on /routing and in the lab
                assert r.share(k) == share
                assert rule_words.uniform_words(float(r.entropy[k]), share, r.uniform) in said
                for q, c in enumerate(r.capsules):  # each length-weighted share at the factor: the one sentence
                    long = rule_words.long_votes_words(f"capsule {c}", float(r.weighted[k, -1, q]), r.uniform, float(r.mean[k, -1, q]))
                    assert (long in said) if long else True
                    if long:
                        assert f"{r.weighted[k, -1, q] / r.uniform:.1f} times uniform" in said
            np.testing.assert_allclose(r.maps[0, -1], dynamic_trace(model, pair, T).coupling_maps(T - 1)[[3, 5]], rtol=1e-6)
            q = int(np.argmax(r.peak[0, -1]))
            G = r.maps.shape[-1]
            assert f"({r.maps[0, -1, q].max():.3f}) is at {position_words(int(r.peak_at[q]), G)}" in said
            ink = ink_under(pair, int(r.peak_at[q]), G)
            assert ("off the digits' ink" in said) == (ink == 0)


def test_the_winner_is_called_right_or_wrong_where_the_label_is_known():
    """A test image's label is known: the EM words say whether the winner (the prediction) is right."""
    digits = [str(k) for k in range(10)]
    assert verdict_words("1", "7", digits) == "wrong: the label is 7"
    assert verdict_words("7", "7", digits) == "right: the label is 7"
    assert verdict_words("7", "drawn", digits) == "no label to check it against"  # a drawing or upload
    sh = EMShares(1, np.array([0.1]), np.array([1.0]), np.array([1.0]), 0.1)
    wrong = em_share_words(sh, "1", trained=1, label="7", names=digits)
    assert "the winner, class 1, is the first panel (red); it is the prediction, wrong: the label is 7." in wrong
    right = em_share_words(sh, "1", trained=1, label="1", names=digits)
    assert "it is the prediction, right: the label is 1." in right and "wrong" not in right
    assert "it is the prediction" not in em_share_words(sh, "1", trained=1)


def test_vote_distances_are_said_to_be_raw_pose_distances(matrix):
    """The words say what em_trace measures: the plain Euclidean distance over the 16 pose entries
    between a vote and the class's mean pose, not scaled by sigma."""
    tr = em_trace(matrix, IMAGE, 2)
    with torch.no_grad():
        votes = matrix.trace(torch.tensor(IMAGE).view(1, 1, 28, 28), 2).trace.votes[0].float().numpy()  # (I, J, 16)
    raw = np.sqrt(((votes[None] - tr.mu[:, None]) ** 2).sum(-1))  # (T, I, J)
    np.testing.assert_allclose(tr.distances, raw, rtol=1e-5, atol=1e-6)
    assert not np.allclose(tr.distances, raw / tr.sigma.mean(-1)[:, None])  # not in units of sigma
    said = distance_words(tr)
    assert "over the 16 entries of the 4x4 pose matrix, in the pose's own raw units: not divided by the spread sigma" in said


@pytest.mark.parametrize(
    "path, said",
    [
        ([0.144, 0.971, 0.746], "rises to 97.1% at iteration 2, then falls: 14.4% at iteration 1 (uniform: 10.0%), 74.6% at iteration 3"),
        ([0.5, 0.2, 0.45], "falls to 20.0% at iteration 2, then rises: 50.0% at iteration 1"),
        ([0.1, 0.3, 0.5], "rises: 10.0% at iteration 1 (uniform: 10.0%), 50.0% at iteration 3"),
    ],
)
def test_em_share_words_read_the_winners_whole_path(path, said):
    """The reported /em path, 14.4% -> 97.1% -> 74.6%, peaked and fell: not "rises"."""
    sh = EMShares(3, np.array(path), np.array([1.0, 0.8, 0.4]), np.array([1.0, 1.0, 0.9]), 0.1)
    assert f"Its share of all assignment {said}" in em_share_words(sh, "3", trained=3)


def test_conv_assignment_words_say_what_the_map_shows():
    P, I, J = 9, 4, 2
    even = np.full((P, I, J), 1 / J)
    said = conv_assignment_words(even, 4, 0)
    assert "Every cell here is 0.5000 (1/2 is 0.5000)" in said and "each column sums to 1.000 at this position" in said
    assert "border" not in said
    moved = np.full((P, I, J), 0.1)
    moved[4] = [[0.05, 0.15], [0.2, 0.1], [0.3, 0.3], [0.1, 0.1]]  # the centre: column sums 0.2, 0.3, 0.6, 0.2
    border = [0, 1, 2, 3, 5, 6, 7, 8]
    for scale, how in ((1.5, "larger at the border"), (1.0, "about the same at the border as inside"), (0.5, "smaller at the border")):
        R = moved.copy()
        R[border] = scale * R[4].sum(1).mean() / J  # border columns sum to `scale` times the inside's mean
        said = conv_assignment_words(R, 4, 2)
        assert "here the columns sum to 0.200 to 0.600 (mean 0.325)" in said
        inside, edge = R[4].sum(1).mean(), R[0].sum(1).mean()
        assert f"the mean column sum is {edge:.3f} on the border and {inside:.3f} inside: the shares are {how}" in said
        assert rules.trend(inside, edge) == {1.5: "rises", 1.0: "stays about level", 0.5: "falls"}[scale]
    # just either side of LEVEL of the larger (the border): border = f * inside, level up to f = 1 / (1 - LEVEL)
    for f, how in ((1 / (1 - rules.LEVEL) + 0.01, "larger"), (1 / (1 - rules.LEVEL) - 0.01, "about the same")):
        R = moved.copy()
        R[border] = f * R[4].sum(1).mean() / J
        assert f"the shares are {how}" in conv_assignment_words(R, 4, 1)


@pytest.mark.parametrize("T", [1, 3])
def test_conv_assignment_words_quote_the_shipped_matrix_models_maps(T):
    """matrix-small-mnist at 1 iteration: every cell 1/16, no border claim; at 3, the column sums the
    map draws and the border claim only as the layer's numbers make it."""
    for path in sorted((ROOT / "checkpoints").glob("matrix-*.safetensors")):
        model, _ = ckpt.load_checkpoint(path)
        tr = em_trace(model, IMAGE, T)
        for layer in ("convcaps1", "convcaps2"):
            res = tr.layers[layer]
            t = min(T, res.R.shape[0]) - 1
            R = res.R[t, 0].numpy()
            P, _, J = R.shape
            for pos in (0, P // 2):
                said = conv_assignment_words(R, pos, t)
                sums = R[pos].sum(1)
                if T == 1:
                    assert np.allclose(R[pos], 1 / J)
                    assert f"Every cell here is {1 / J:.4f}" in said and "border" not in said
                else:
                    assert f"the columns sum to {sums.min():.3f} to {sums.max():.3f} (mean {sums.mean():.3f})" in said
                    n = round(P**0.5)
                    grid = R.sum(2).mean(1).reshape(n, n)
                    inside = grid[1:-1, 1:-1].mean()
                    edge = (grid.sum() - grid[1:-1, 1:-1].sum()) / (P - (n - 2) ** 2)
                    assert f"{edge:.3f} on the border and {inside:.3f} inside" in said
                    assert ("larger at the border" in said) == (rules.trend(inside, edge) == "rises")


@pytest.mark.parametrize("couplings", ["dynamic", "random", "uniform"])
def test_pair_routing_title_is_true_for_how_the_model_was_trained(couplings):
    config = preset("capsnet-small", in_size=36, couplings=couplings)
    title = pair_routing_title((2, 1), config)
    T = config.routing_iterations
    assert title.startswith(f"Couplings c to capsules 2 and 1 per dynamic-routing iteration ({T}")
    if couplings == "dynamic":
        assert title.endswith(", as the model was trained)")
    else:
        assert "as the model was trained" not in title
        assert title.endswith(f"; the model was trained with {routing_words(couplings)} instead)")


def test_pair_routing_title_for_every_shipped_multimnist_model():
    for path in sorted((ROOT / "checkpoints").glob("*multimnist.safetensors")):
        _, meta = ckpt.load_checkpoint(path)
        title = pair_routing_title((3, 5), meta.config)
        assert f"({meta.config.routing_iterations}" in title
        assert ("as the model was trained" in title) == (meta.config.couplings == "dynamic"), path.stem


# ---------- the explorer: what each dimension does to this drawing, measured (issue 50) ----------


def test_the_explorer_intro_promises_no_meaning_a_dimension_may_not_show():
    from capsviz.analysis.explain import EXPLORER_INTRO

    assert "shows what it encodes" not in EXPLORER_INTRO
    assert "Which dimension does what is learned, not given" in EXPLORER_INTRO
    assert "measures how much each one changes the drawing" in EXPLORER_INTRO


def test_offset_words_follow_the_measured_change_on_both_sides_of_each_rule():
    from capsviz.analysis.explain import offset_words

    rebuilt = np.zeros((4, 4), np.float32)
    rebuilt[1:3, 1:3] = 1.0  # ink 4, mean pixel value 0.25
    d = np.zeros(16, np.float32)
    assert offset_words(rebuilt, rebuilt, d) == ""  # no offset: nothing to say
    d[6] = 0.2
    faded = rebuilt * (rules.FAINT - 0.01)  # keeps 19% of the ink
    said = offset_words(rebuilt, faded, d)
    assert said.startswith("Moving d6 by +0.20, the decoder draws almost nothing (19% of the ink") and "less than 20%" in said
    kept = rebuilt * (rules.FAINT + 0.01)
    assert "draws almost nothing" not in offset_words(rebuilt, kept, d)
    # the mean change per pixel just under / over 10% of the mean pixel value (0.25)
    below, above = rebuilt.copy(), rebuilt.copy()
    below[0, 0] = 16 * 0.25 * (rules.SMALL_CHANGE - 0.01)
    above[0, 0] = 16 * 0.25 * (rules.SMALL_CHANGE + 0.01)
    assert "changes the drawing almost nothing: the mean change per pixel is 9% of" in offset_words(rebuilt, below, d)
    said = offset_words(rebuilt, above, d)
    assert "almost nothing" not in said and said.startswith("Moving d6 by +0.20 changes the drawing by 11% of")


def test_effect_words_name_the_dimensions_the_bars_draw_tallest_and_those_that_change_almost_nothing():
    from capsviz.analysis.explain import effect_words

    rebuilt = np.full((4, 4), 0.5, np.float32)  # mean pixel value 0.5: almost nothing below 0.05
    effect = np.full(16, 0.2)
    effect[[6, 10, 13]] = [0.4, 0.35, 0.3]
    said = effect_words(effect, rebuilt, "7", -0.25, 0.25)
    assert "the dimensions that change the drawing most are d6 (0.400), d10 (0.350), d13 (0.300)" in said
    assert "Every dimension changes it by at least 10% of that value" in said
    effect[2] = 0.049
    effect[5] = 0.051
    said = effect_words(effect, rebuilt, "7", -0.25, 0.25)
    assert "d2 (0.049) changes it almost nothing" in said and "d5 (0.051)" not in said


def test_the_explorer_words_quote_the_shipped_models_grid(real_data):
    from capsviz.analysis import decode, dimension_effect, perturbation_grid, predict
    from capsviz.analysis.explain import effect_words, offset_words
    from capsviz.data.mnist import load_mnist

    test = load_mnist("mnist", "test")
    model, _ = ckpt.load_checkpoint(Path(__file__).resolve().parents[1] / "checkpoints" / "capsnet-mnist.safetensors")
    image = test.images[0].numpy().astype(np.float32) / 255  # a 7
    p = predict(model, image)
    v = p.capsules[p.predicted]
    effect = dimension_effect(perturbation_grid(model, v, p.predicted))
    rebuilt = decode(model, v, p.predicted)
    said = effect_words(effect, rebuilt, "7", STEPS[0], STEPS[-1])
    top = int(np.argmax(effect))
    assert f"most are d{top} ({effect[top]:.3f})" in said and f"mean pixel value is {rebuilt.mean():.3f}" in said
    # the teacher's case: the slider words follow the ink the decoder keeps, whichever side of the rule
    for k in range(16):
        d = np.zeros(16, np.float32)
        d[k] = 0.2
        changed = decode(model, v, p.predicted, d)
        ink = float(changed.sum() / rebuilt.sum())
        assert ("the decoder draws almost nothing" in offset_words(rebuilt, changed, d)) == (ink < rules.FAINT), k
