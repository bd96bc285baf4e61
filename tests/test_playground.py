"""The routing playgrounds' core: the mechanism shows with the real routing functions, and the
figures, GIFs and glossary built on them."""

import io

import numpy as np
import pytest
import torch
from PIL import Image

from capsviz import glossary
from capsviz.analysis.playground import (
    DYNAMIC_PRESETS,
    EM_PRESETS,
    decode_points,
    dynamic_toy,
    em_toy,
    encode_points,
    squash_np,
)
from capsviz.routing import dynamic_routing, em_routing
from capsviz.viz.animation import dynamic_frames, em_frames, gif_bytes


def test_agreeing_cluster_takes_its_capsule_while_outliers_spread():
    toy = dynamic_toy(DYNAMIC_PRESETS["outliers"][:, :2], iterations=3)
    c3 = toy.c[2]  # the couplings of iteration 3
    np.testing.assert_allclose(toy.c[0], 0.5)  # iteration 1: maximal confusion
    assert (c3[:4, 0] > 0.8).all(), c3  # capsules 1-4 agree on upper capsule 1
    assert (c3[4:].max(1) < 0.6).all(), c3  # the outliers stay split between the two
    entropy = toy.entropy()[2]
    assert entropy[4:].min() > 3 * entropy[:4].max()


@pytest.mark.parametrize("J", [2, 3])
def test_two_groups_route_to_their_own_capsules(J):
    c3 = dynamic_toy(DYNAMIC_PRESETS["agreeing cluster"][:, :J], 3).c[2]
    assert (c3[:3, 0] > 0.8).all() and (c3[3:, 1] > 0.8).all(), c3


def test_dynamic_toy_is_the_routing_function_and_eq_2():
    u = DYNAMIC_PRESETS["noise"][:, :3]
    toy = dynamic_toy(u, 4)
    ref = dynamic_routing(torch.tensor(u).unsqueeze(0), 4, record=True)
    np.testing.assert_allclose(toy.c, ref.c[:, 0].numpy())
    np.testing.assert_allclose(toy.v[-1], ref.v[0].numpy())
    np.testing.assert_allclose(squash_np(toy.s), toy.v, atol=1e-12)  # s as recomputed is what routing squashed
    np.testing.assert_allclose(toy.b[1:], np.cumsum(toy.agreement, 0)[:-1], atol=1e-12)  # b grows by u_hat . v
    np.testing.assert_allclose(toy.c.sum(-1), 1.0)


def test_moving_one_prediction_changes_its_coupling():
    u = DYNAMIC_PRESETS["outliers"][:, :2].copy()
    before = dynamic_toy(u, 3).c[2, 4, 0]
    u[4, 0] = u[0, 0]  # outlier 5 now predicts what the cluster predicts
    after = dynamic_toy(u, 3).c[2, 4, 0]
    assert before < 0.6 < 0.8 < after


def test_em_separates_two_clusters_and_the_tighter_one_is_more_active():
    votes, a_in = EM_PRESETS["two clusters"]
    for J in (2, 3):
        toy = em_toy(votes[:, :J], a_in, iterations=3)
        R = toy.R[-1]  # the assignments of the last M-step
        np.testing.assert_allclose(toy.R[0], 1.0 / J, atol=1e-6)
        assert (R[:3, 0] > 0.85).all() and (R[3:, 1] > 0.85).all(), R
        assert toy.sigma[-1, 0].max() < toy.sigma[-1, 1].min()  # capsule 1's cluster is the tighter
        assert toy.a[-1, 0] > toy.a[-1, 1], toy.a


def test_em_toy_is_the_routing_function():
    votes, a_in = EM_PRESETS["noise"]
    toy = em_toy(votes, a_in, 3, beta_u=0.2, beta_a=-0.1, final_lambda=1.0)
    ref = em_routing(
        torch.tensor(votes, dtype=torch.float32), torch.tensor(a_in, dtype=torch.float32), 3, 0.2, -0.1, final_lambda=1.0, record=True
    )
    np.testing.assert_allclose(toy.R, ref.R.numpy())
    np.testing.assert_allclose(toy.a[-1], ref.a.numpy())
    np.testing.assert_allclose(toy.lambdas, [1 / 3, 2 / 3, 1.0])
    np.testing.assert_allclose(toy.R.sum(-1), 1.0, atol=1e-5)


def test_em_activation_with_two_capsules_carries_only_the_ranking():
    """capsviz's EM standardises the costs across the J capsules: with J = 2 they become -1 and +1,
    so the activations are logistic(lambda * (beta_a -+ 1)) however tight the clusters are. The
    playground says so; this pins the fact it states."""
    for name in EM_PRESETS:
        votes, a_in = EM_PRESETS[name]
        a = em_toy(votes[:, :2], a_in, 3).a[-1]
        np.testing.assert_allclose(sorted(a), [1 / (1 + np.exp(0.3)), 1 / (1 + np.exp(-0.3))], atol=1e-5)


def test_lower_activation_weights_a_vote():
    votes, a_in = EM_PRESETS["outliers"]
    quiet = a_in.copy()
    quiet[4:] = 0.05  # the outliers barely present: capsule 2's Gaussian should no longer fit them
    loud, soft = em_toy(votes[:, :2], a_in, 3), em_toy(votes[:, :2], quiet, 3)
    assert not np.allclose(loud.mu[-1, 1], soft.mu[-1, 1])


def test_points_round_trip_through_a_link():
    u = DYNAMIC_PRESETS["outliers"]
    text = encode_points(u)
    np.testing.assert_allclose(decode_points(text, u.shape), u)
    assert decode_points("1_2_x", (3,)) is None and decode_points("1_2", (3,)) is None and decode_points(None, (3,)) is None
    np.testing.assert_allclose(decode_points("9_-9_0", (3,)), [3, -3, 0])  # clipped to the sliders' range


def test_gif_has_one_frame_per_iteration_and_opens():
    frames = dynamic_frames(dynamic_toy(DYNAMIC_PRESETS["outliers"][:, :2], 3))
    data = gif_bytes(frames)
    gif = Image.open(io.BytesIO(data))
    assert gif.format == "GIF" and gif.n_frames == 3
    first = np.asarray(gif.convert("RGB"))
    gif.seek(2)
    assert not np.array_equal(first, np.asarray(gif.convert("RGB")))  # the couplings moved
    em = Image.open(io.BytesIO(gif_bytes(em_frames(em_toy(*EM_PRESETS["two clusters"], 2)))))
    assert em.n_frames == 2
    with pytest.raises(ValueError):
        gif_bytes([])


def test_glossary_gives_plain_words_for_every_symbol():
    for key in ("u_hat", "b", "c", "s", "v", "a_j", "R", "lambda", "beta_u", "beta_a", "mu", "sigma", "squash", "margin_loss", "agreement"):
        assert len(glossary.term(key).explanation) > 40
    assert glossary.label("c") == "c_ij (coupling)"
    assert "**R_ij (assignment)**" in glossary.help_text("R", "lambda")
    assert glossary.term("coupling") is glossary.term("c") and glossary.term("margin loss") is glossary.term("margin_loss")
    assert glossary.term("E-step") is glossary.term("E_step")
    with pytest.raises(KeyError, match="known"):
        glossary.term("coupling coefficient")


def test_glossary_explains_what_the_efficient_capsnet_views_show():
    prior = glossary.term("prior")
    assert glossary.label("prior") == "b_ji (learned prior)" and glossary.term("learned prior") is prior
    assert "s_j = sum_i (c_ij + b_ji) u_hat_j|i" in prior.explanation and "the same for" in prior.explanation
    assert "sqrt(D)" in glossary.term("self_attention").explanation and "prior b_ji" in glossary.term("self_attention").explanation
    assert "1 - e^-|s|" in glossary.term("efficient_squash").explanation
    assert prior in glossary.entries("prior") and glossary.term("efficient_squash") in glossary.entries("Efficient-CapsNet")


def test_attention_toy_is_self_attention_routing_worked_by_hand():
    """Two lower capsules, two upper: a_ij = u_hat_j|i . (u_hat_j|1 + u_hat_j|2) / sqrt(2), c_i = softmax_j a_i."""
    from capsviz.analysis.playground import attention_toy
    from capsviz.routing import efficient_squash

    u = np.array([[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, -1.0]]])  # (I, J, D)
    toy = attention_toy(u)
    # upper 1: both predict (1, 0), sum (2, 0): a = 2/sqrt2 each; upper 2: (0, 1) and (0, -1) cancel: a = 0
    a = np.array([[2 / np.sqrt(2), 0.0], [2 / np.sqrt(2), 0.0]])
    np.testing.assert_allclose(toy.b[0], a, atol=1e-12)
    c = np.exp(a) / np.exp(a).sum(1, keepdims=True)
    np.testing.assert_allclose(toy.c[0], c, atol=1e-12)
    s = np.einsum("ij,ijd->jd", c, u)
    np.testing.assert_allclose(toy.s[0], s, atol=1e-12)
    np.testing.assert_allclose(toy.v[0], efficient_squash(torch.tensor(s)).numpy(), atol=1e-9)
    assert toy.iterations == 1
