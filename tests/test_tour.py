"""The guided tour's core: every number it shows is the model's own (same routing, same output)."""

import numpy as np
import pytest
import torch
from PIL import ImageDraw
from synthetic import synthetic_digits

from capsviz.analysis import as_batch, rules
from capsviz.analysis.steps import SHOWN, squashed
from capsviz.config import preset
from capsviz.families.capsnet.tour import capsnet_steps, capsnet_tour
from capsviz.families.efficient_capsnet.tour import efficient_squashed, efficient_steps, efficient_tour
from capsviz.families.matrix_capsnet.tour import matrix_steps, matrix_tour
from capsviz.glossary import CLASS_WORDS, DIGIT_WORDS, class_words
from capsviz.i18n import speaking
from capsviz.models import build_model
from capsviz.registry import FAMILIES
from capsviz.viz.animation import tour_em_frames, tour_routing_frames, tour_routing_pieces, tour_vote_frame
from capsviz.viz.teach import PANEL, SMALL, whole

NAMES = [str(k) for k in range(10)]


@pytest.fixture(scope="module")
def image():
    images, _ = synthetic_digits(4, seed=3)
    return images[0].astype(np.float32) / 255.0


@pytest.fixture(scope="module")
def efficient():
    """A small untrained Efficient-CapsNet (seeded) with a learned prior that is not zero."""
    torch.manual_seed(0)
    model = build_model(preset("efficient-capsnet", conv_channels=(8, 16, 16, 32), primary_caps=4, decoder_hidden=(32, 64))).eval()
    with torch.no_grad():
        model.b.normal_(0, 0.1)
    return model


@torch.no_grad()
def test_capsnet_tour_is_the_models_own_forward(capsnet, image):
    tour = capsnet_tour(capsnet, image)
    out = capsnet(as_batch(image))
    T, I, J = tour.c.shape
    assert T == capsnet.config.routing_iterations and J == 10 and I == tour.grid**2 * tour.types
    np.testing.assert_allclose(tour.v[-1], out.capsules[0].numpy(), atol=1e-5)
    np.testing.assert_allclose(tour.lengths, out.scores[0].numpy(), atol=1e-5)
    assert tour.winner == int(out.scores[0].argmax())
    np.testing.assert_allclose(tour.reconstruction, out.reconstruction[0].numpy(), atol=1e-5)
    np.testing.assert_allclose(tour.c[0], 1 / J, atol=1e-6)  # iteration 1: uniform
    np.testing.assert_allclose(tour.c.sum(-1), 1, atol=1e-5)
    np.testing.assert_allclose(squashed(tour.s), tour.v, atol=1e-5)  # s as shown is what routing squashed
    assert tour.shown.shape == (SHOWN,) and len(tour.shown_names) == SHOWN
    # the shown capsules are the longest predictions for the winner
    assert tour.pred_all_len[tour.shown, tour.winner].min() >= np.sort(tour.pred_all_len[:, tour.winner])[-SHOWN]


@torch.no_grad()
def test_the_routing_picture_keeps_agreement_exact(capsnet, image):
    """Each digit capsule's plane has its final v as first axis: a drawn prediction's x times |v|
    is its agreement u_hat . v, which is what routing adds to b."""
    tour = capsnet_tour(capsnet, image)
    u_hat = capsnet.predictions(as_batch(image))[0]  # (J, I, D)
    j = tour.winner
    v = torch.as_tensor(tour.v[-1, j])
    agreement = (u_hat[j, tour.shown] @ v).numpy()
    np.testing.assert_allclose(tour.pred2d[j, :, 0] * np.linalg.norm(tour.v[-1, j]), agreement, atol=1e-5)
    np.testing.assert_allclose(np.abs(tour.v2d[-1, j, 0]), np.linalg.norm(tour.v[-1, j]), atol=1e-5)
    # the last iteration's agreement is b's next increment: b[t+1] - b[t] = u_hat . v_t
    b_step = tour.b[1, tour.shown, j] - tour.b[0, tour.shown, j]
    np.testing.assert_allclose(b_step, (u_hat[j, tour.shown] @ torch.as_tensor(tour.v[0, j])).numpy(), atol=1e-5)


@torch.no_grad()
def test_capsnet_primary_and_conv1_views(capsnet, image):
    tour = capsnet_tour(capsnet, image)
    G, K = tour.grid, tour.types
    assert tour.primary_len.shape == (G, G, K) and (tour.primary_len < 1).all()
    np.testing.assert_allclose(tour.arrow_len, tour.primary_len.max(-1))
    np.testing.assert_allclose(np.linalg.norm(tour.arrow_dir, axis=-1), 1, atol=1e-5)
    assert tour.conv1.shape[0] == min(16, tour.conv1_total) and (tour.conv1 >= 0).all()  # after ReLU
    means = tour.conv1.mean((1, 2))
    assert (np.diff(means) <= 1e-6).all()  # strongest first


@torch.no_grad()
def test_matrix_tour_is_the_models_own_em(matrix, image):
    tour = matrix_tour(matrix, image)
    out = matrix(as_batch(image))
    np.testing.assert_allclose(tour.a[-1], out.scores[0].numpy(), atol=1e-5)
    assert tour.winner == int(out.scores[0].argmax())
    T, I, J = tour.R.shape
    np.testing.assert_allclose(tour.R[0], 1 / J, atol=1e-6)
    np.testing.assert_allclose(tour.R.sum(-1), 1, atol=1e-4)
    assert tour.votes2d.shape == (J, SHOWN, 2) and tour.mu2d.shape == (T, J, 2) and (tour.sigma2d > 0).all()
    np.testing.assert_allclose(tour.lambdas[-1], matrix.config.final_lambda, atol=1e-6)
    assert tour.pose.shape == (4, 4) and tour.primary_a.max() <= 1


def test_steps_and_frames_cover_every_iteration(capsnet, matrix, image):
    assert [s.key for s in capsnet_steps(3)] == [
        "input",
        "conv1",
        "primary",
        "predictions",
        "iteration1",
        "iteration2",
        "iteration3",
        "lengths",
        "reconstruction",
        "lab",
    ]
    assert [s.key for s in matrix_steps(2)] == ["input", "primary", "votes", "iteration1", "iteration2", "activations"]
    assert len(tour_routing_frames(capsnet_tour(capsnet, image), NAMES)) == 3
    frames = tour_em_frames(matrix_tour(matrix, image), NAMES)
    assert len(frames) == matrix.config.routing_iterations and frames[0].size == frames[-1].size


PHONE = 358  # px: the page's column on a 390 px phone (tests/test_narrow_figures.py)
READABLE = 11  # px: the smallest text a phone shows readably


@pytest.mark.parametrize("lang", ["en", "zh-Hans", "ja"])
def test_the_tours_routing_figure_comes_in_pieces_a_phone_shows_readably(capsnet, image, monkeypatch, lang):
    """A picture per class capsule and one of the share bars (their names, the followed primary
    capsules' places, wrapped), each narrow enough that a phone shows its smallest text (SMALL px
    as drawn) at READABLE px or more; the slides' figure is these pieces."""
    sizes: dict[int, list[int]] = {}
    text = ImageDraw.ImageDraw.text

    def recording(self, xy, words, fill=None, font=None, *args, **kwargs):
        sizes.setdefault(id(self.im), []).append(font.size)
        return text(self, xy, words, fill, font, *args, **kwargs)

    tour = capsnet_tour(capsnet, image)
    monkeypatch.setattr(ImageDraw.ImageDraw, "text", recording)
    with speaking(lang):
        pieces = tour_routing_pieces(tour, NAMES, 1, "digit capsule")
        assert np.array_equal(np.asarray(whole(pieces)), np.asarray(tour_routing_frames(tour, NAMES, only=1, capsule="digit capsule")[0]))
    assert [u.width for u in pieces.uppers] == [PANEL + 1] * 2 and pieces.title and pieces.key and pieces.note
    for picture in [*pieces.uppers, pieces.bars]:
        drawn = sizes[id(picture.im)]
        assert drawn and min(drawn) >= SMALL, drawn
        assert SMALL * min(1.0, PHONE / picture.width) >= READABLE, f"{picture.width} px wide"
    assert pieces.bars.height > SHOWN * 24  # the places' names wrapped under their first lines


def test_the_vote_frame_draws_votes_without_a_fit(matrix, image):
    tour = matrix_tour(matrix, image)
    votes, fitted = tour_vote_frame(tour, NAMES), tour_em_frames(tour, NAMES, only=0)[0]
    assert votes.size == fitted.size and not np.array_equal(np.asarray(votes), np.asarray(fitted))


def test_markdown_table_keeps_three_decimals_and_escapes_bars():
    from capsviz.viz.teach import markdown_table

    text = markdown_table({"capsule": ["a|b", "c"], "c to 7": np.array([0.12345, 1.0], np.float32)})
    assert text.splitlines() == ["| capsule | c to 7 |", "|---|---|", "| a\\|b | 0.123 |", "| c | 1.000 |"]


@torch.no_grad()
def test_efficient_tour_is_the_models_own_routing(efficient, image):
    tour = efficient_tour(efficient, image)
    x = as_batch(image)
    out = efficient(x)
    r = efficient.route(efficient.predictions(x), record=True)
    I, J = tour.c.shape
    assert (I, J) == (efficient.num_primary, 10) and tour.iterations == 1
    np.testing.assert_allclose(tour.c, r.c[0, 0].numpy())
    np.testing.assert_allclose(tour.a, r.b[0, 0].numpy())
    np.testing.assert_allclose(tour.prior, r.prior.numpy())
    np.testing.assert_allclose(tour.prior, efficient.b.T.numpy())
    np.testing.assert_allclose(tour.v, out.capsules[0].numpy(), atol=1e-6)
    np.testing.assert_allclose(tour.lengths, out.scores[0].numpy(), atol=1e-6)
    assert tour.winner == int(out.scores[0].argmax()) != tour.runner_up
    np.testing.assert_allclose(tour.reconstruction, efficient.decode(out.capsules[0, tour.winner], tour.winner)[0].numpy(), atol=1e-6)
    np.testing.assert_allclose(tour.reconstruction, out.reconstruction[0].numpy(), atol=1e-6)  # masked by the longest
    np.testing.assert_allclose(efficient_squashed(tour.s), tour.v, atol=1e-5)  # s as shown is what routing squashed
    np.testing.assert_allclose(tour.c.sum(-1), 1, atol=1e-5)
    assert ((tour.entropy > 0) & (tour.entropy <= 1 + 1e-6)).all()


@torch.no_grad()
def test_efficient_tour_layers_as_the_page_describes_them(efficient, image):
    tour = efficient_tour(efficient, image)
    x = as_batch(image)
    assert tour.sizes == [(8, 24), (16, 22), (16, 20), (32, 9)] and tour.grid == 9  # 28 -> 24 -> 22 -> 20 -> 9
    assert tour.maps.shape == (16, 9, 9) and (tour.maps >= 0).all()  # after ReLU
    assert (np.diff(tour.maps.mean((1, 2))) <= 1e-6).all()  # strongest first
    np.testing.assert_allclose(tour.u, efficient.primary_capsules(x)[0].numpy(), atol=1e-6)
    np.testing.assert_allclose(efficient_squashed(tour.s_primary), tour.u, atol=1e-6)
    np.testing.assert_allclose(tour.primary_len, 1 - np.exp(-np.linalg.norm(tour.s_primary, axis=-1)), atol=1e-5)  # their squash
    u_hat = efficient.predictions(x)[0]  # (J, I, D)
    np.testing.assert_allclose(tour.pred_len, u_hat.norm(dim=-1).T.numpy(), atol=1e-6)
    # the attention written out from the paper, one capsule at a time
    D = u_hat.shape[-1]
    a = np.array([[float(u_hat[j, i] @ u_hat[j].sum(0)) / D**0.5 for j in range(u_hat.shape[0])] for i in range(u_hat.shape[1])])
    np.testing.assert_allclose(tour.a, a, rtol=1e-5, atol=1e-5)
    assert tour.parameters == sum(p.numel() for n, p in efficient.named_parameters() if not n.startswith("decoder."))
    # near uniform by the lab's one rule: the entropy and the predicted class's share both decide
    assert tour.near_uniform == rules.near_uniform(tour.entropy.mean(), tour.c[:, tour.winner].mean(), 1 / tour.c.shape[1])
    assert all(tour.c[i].max() > 0.5 for i in tour.decided()) and len(tour.decided(0.0)) == len(tour.c)


def test_efficient_steps():
    assert [s.key for s in efficient_steps()] == [
        "input",
        "convs",
        "primary",
        "predictions",
        "routing",
        "lengths",
        "reconstruction",
        "lab",
    ]
    assert (
        FAMILIES["efficient"].guided_tour.follow is efficient_tour
        and FAMILIES["efficient"].guided_tour.steps(1, DIGIT_WORDS) == efficient_steps()
    )


@pytest.mark.parametrize(
    "dataset, digits",
    [("mnist", True), ("multimnist", True), ("affnist", True), ("fashion-mnist", False), ("folder:/x/pets", False), ("npz:/a.npz", False)],
)
def test_the_class_capsules_are_digit_capsules_only_for_digits(dataset, digits):
    words = class_words(dataset)
    assert words.digits is digits and words.capsule == ("digit capsule" if digits else "class capsule")
    assert words.capsules == words.capsule + "s"

    class Meta:  # what pages pass: a checkpoint's metadata
        image_dataset = dataset

    assert class_words(Meta()) is words


def test_step_titles_follow_the_models_words():
    for steps in (capsnet_steps(3, CLASS_WORDS), efficient_steps(CLASS_WORDS), FAMILIES["capsnet"].guided_tour.steps(2, CLASS_WORDS)):
        titles = " ".join(s.title for s in steps)
        assert "digit" not in titles.lower() and "DigitCaps" not in titles
    assert "DigitCaps: lengths are the answer" in [s.title for s in capsnet_steps(3)]  # the paper's layer, for digits
    assert [s.key for s in FAMILIES["matrix"].guided_tour.steps(2, CLASS_WORDS)] == [s.key for s in matrix_steps(2)]
