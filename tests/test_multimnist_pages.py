"""The pages that follow one image, with a shipped MultiMNIST model (36x36 canvases): /tour and
/routing offer test digits, centred on the model's canvas, say so and point to the MultiMNIST page
for pairs; every tour step and the routing maps are shown, with no exception (walk item 28)."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest
from test_app import router_mode  # noqa: F401 - app.py's router in charge, as served

from capsviz.analysis.routing import canvas_words, centred, centred_batch, on_canvas
from capsviz.analysis.tour import tour_of
from capsviz.checkpoint import load_checkpoint
from capsviz.glossary import class_words

ROOT = Path(__file__).resolve().parents[1]
MODEL = "capsnet-multimnist.safetensors"


def test_only_a_multimnist_model_gets_a_canvas():
    assert on_canvas("multimnist", 36) == 4 and on_canvas("mnist", 28) == 0 and on_canvas("multimnist", 28) == 0
    digit = np.ones((28, 28), np.float32)
    image = centred(digit, 4)
    assert image.shape == (36, 36) and image[4:32, 4:32].all() and image.sum() == digit.sum()  # centred, nothing else drawn
    assert centred(digit, 0) is digit
    batch = centred_batch(torch.ones(2, 1, 28, 28), 4)
    assert batch.shape == (2, 1, 36, 36) and batch.sum() == 2 * 28 * 28
    said = canvas_words(36, 4)
    assert "36x36" in said and "4 blank pixels" in said and "MultiMNIST** page follows pairs" in said


@pytest.fixture
def shipped(real_data, monkeypatch, tmp_path):
    monkeypatch.setenv("CAPSVIZ_CHECKPOINTS", str(ROOT / "checkpoints"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    app.query_params["model"] = MODEL
    return app


def canvas_note_and_link(app) -> None:
    assert any("Here it reads one digit alone, centred on that canvas" in i.value for i in app.info)
    assert any('page: "multimnist"' in str(link.proto) for link in app.get("page_link"))


def test_the_tour_follows_a_test_digit_on_a_multimnist_models_canvas(shipped):
    """The tour opens on its first step with a test image (every step is walked for every shipped
    model in test_tour_steps.test_every_step_of_a_shipped_models_tour_on_the_page)."""
    app = shipped
    app.switch_page("pages/tour.py").run()
    assert not app.exception, app.exception
    canvas_note_and_link(app)
    assert app.number_input(key="image").value == 0  # a test image, not an upload
    _, meta = load_checkpoint(ROOT / "checkpoints" / MODEL)
    # the chapter "Why capsules" first, which says why it cannot measure a model of pairs
    assert app.get("progress")[0].proto.text.endswith("**Why capsules**")
    assert any("reads 36x36 images" in m.value for m in app.markdown)
    app.button(key="tour_next").click().run()
    first = tour_of(meta.config).steps(meta.config.routing_iterations, class_words(meta), meta.config.primary_grid)[0]
    assert app.get("progress")[0].proto.text.endswith(f"**{first.title}**")
    assert any("This is the image the tour follows through **capsnet-multimnist**" in m.value for m in app.markdown)


def test_the_routing_page_routes_a_test_digit_on_a_multimnist_models_canvas(shipped):
    app = shipped
    app.switch_page("pages/routing.py").run()
    assert not app.exception, app.exception
    canvas_note_and_link(app)
    assert app.number_input(key="image").value == 0
    drawn = {json.loads(c.proto.spec)["layout"]["title"]["text"] for c in app.get("plotly_chart")}
    assert any(t.startswith("Iteration 3: couplings c") for t in drawn)  # the coupling maps
    assert any(t.startswith("Coupling to") for t in drawn)  # the detailed map
    assert "Coupling to the predicted class, by iteration" in drawn  # the 64 test digits, centred too
    said = " ".join(c.value for c in app.caption)
    assert "The chart runs the 64 images with dynamic routing" in said and "Upload" not in said


def test_the_multimnist_intro_states_fig_5s_idea_as_the_papers_aim_not_a_promise():
    """Issue 50: the intro promised that routing explains each pixel once, while the page measured
    55 of 166 ink pixels claimed by both digits."""
    from capsviz.analysis.multimnist import intro_words

    said = intro_words(36, 4)
    assert "Fig. 5 of Sabour et al., whose aim is that routing explains each pixel once" in said
    assert "the page measures how far that holds here" in said
    assert "routing lets each pixel be explained once" not in said and "finds little to draw" not in said


def test_segment_words_say_each_pixel_explained_once_only_when_no_ink_pixel_is_claimed_twice():
    from capsviz.analysis.multimnist import BACKGROUND, BOTH, FIRST, SECOND, UNEXPLAINED, segment_words

    segs = np.array([[BACKGROUND, FIRST, FIRST, SECOND, UNEXPLAINED]])
    once = segment_words(segs, "7", "2")
    assert "of the 4 ink pixels, capsule 7 alone claims 2, capsule 2 alone 1, both 0 and neither 1" in once
    assert "no other ink pixel is claimed twice, so here each pixel is explained once, as the paper aims." in once
    both = np.array([[BACKGROUND, FIRST, BOTH, SECOND, UNEXPLAINED]])
    twice = segment_words(both, "7", "2")
    assert "1 of 4 ink pixels (25%) are explained by both, not once as the paper aims" in twice and "explained once, as" not in twice
    # the pair's own digits: both claims are right where the two strokes really cross, and only there
    crossing = np.zeros((2, 1, 5))
    crossing[:, 0, 2] = 1.0
    right = segment_words(both, "7", "2", crossing)
    assert "(on 1 of those 1 the two digits' own strokes cross, where both claims are right)" in right
    assert "explained once, as the paper aims" in right
    apart = np.zeros((2, 1, 5))
    apart[0, 0, 2] = 1.0  # only the first digit has ink there
    wrong = segment_words(both, "7", "2", apart)
    assert "1 of 4 ink pixels (25%) are explained by both where only one digit has ink, not once" in wrong and "cross" not in wrong


def test_segment_words_quote_the_segmentation_of_a_real_pair_for_the_shipped_models(real_data):
    from capsviz.analysis.multimnist import BOTH, INK_LEVEL, UNEXPLAINED, compose_pair, draw_pair, segment, segment_words
    from capsviz.data.mnist import load_mnist

    test = load_mnist("mnist", "test")
    for name in ("capsnet-multimnist", "capsnet-small-multimnist"):
        model, _ = load_checkpoint(ROOT / "checkpoints" / f"{name}.safetensors")
        first, second, shifts = draw_pair(test.labels, 0)
        pair = compose_pair(test.images, test.labels, first, second, shifts)
        seg = segment(model, pair.image)
        said = segment_words(seg.segments, "a", "b", pair.parts)
        ink, both = int((seg.segments >= UNEXPLAINED).sum()), int((seg.segments == BOTH).sum())
        crossing = int(((seg.segments == BOTH) & (pair.parts > INK_LEVEL).all(0)).sum())
        assert f"of the {ink} ink pixels" in said and f"both {both} and neither" in said, name
        assert ("explained once, as the paper aims" in said) == (both == crossing), name
        if both > crossing:
            assert f"{both - crossing} of {ink} ink pixels" in said, name
