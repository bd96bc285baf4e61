"""AppTest of the dynamic routing page over test_app's tiny checkpoints: every sentence says which
iteration it describes, the same iteration the slider chose; what the model was trained with is
said the same way everywhere; the charts count positions from 1 and draw entropy on a fixed scale."""

import json

import test_app
import torch

from capsviz.analysis import rules
from capsviz.analysis.routing import trained_with_words
from capsviz.checkpoint import load_checkpoint, save_checkpoint
from capsviz.config import preset
from capsviz.models import build_model

app = test_app.app
router_mode = test_app.router_mode


def charts(app) -> dict:
    return {json.loads(c.proto.spec)["layout"]["title"]["text"]: json.loads(c.proto.spec) for c in app.get("plotly_chart")}


def captions(app) -> str:
    return " ".join(c.value for c in app.caption)


def test_every_sentence_describes_the_chosen_iteration(app):
    app.query_params.update({"model": "tiny-capsnet.safetensors", "iterations": "10"})
    app.switch_page("pages/routing.py").run()
    assert not app.exception, app.exception
    said = captions(app)
    assert "At iteration 10, the count chosen above" in said  # was: iteration 3, the model's own, whatever the slider
    assert "at iteration 10 its couplings are" in said and "Over the 64 images at iteration 10" in said
    assert "move only a little away from uniform" not in said
    drawn = charts(app)
    entropy = drawn["Evenness of the couplings, %"]
    assert entropy["layout"]["yaxis"]["range"] == [0, 105]  # a 0.1% drop draws as one, not as a plunge
    (line,) = entropy["layout"]["shapes"]
    assert line["y0"] == line["y1"] == 100 * rules.NEAR_UNIFORM_ENTROPY and line["line"]["dash"] == "dash"
    agreement = next(v for k, v in drawn.items() if k.startswith("Agreement"))
    assert agreement["data"][0]["customdata"][0][0] == "type 1 at row 1, col 1"  # as the tour names it, from 1
    assert agreement["data"][0]["x"][0] == 1 and agreement["data"][0]["y"][0] == 1
    assert "the prediction is" in said and "with 1 to 10 iterations" in said  # the sweep chart has its caption


def test_a_baseline_model_is_said_to_be_trained_with_its_own_couplings_everywhere(app):
    torch.manual_seed(0)
    path = app.folder / "tiny-random.safetensors"
    save_checkpoint(
        path, build_model(preset("capsnet-small", conv1_channels=16, primary_types=4, couplings="random")), {"dataset": "mnist"}
    )
    trained = trained_with_words(load_checkpoint(path)[1].config)
    app.query_params.update({"model": "tiny-random.safetensors"})
    app.switch_page("pages/routing.py").run()
    assert not app.exception, app.exception
    assert f"was trained with {trained}" in app.info[0].value
    said = captions(app)
    assert f"this model was trained with {trained}" in said and "the one this model was trained with" not in said


def test_one_iteration_says_only_the_coupling_maps_are_flat(app):
    app.query_params.update({"model": "tiny-capsnet.safetensors", "iterations": "1"})
    app.switch_page("pages/routing.py").run()
    assert not app.exception, app.exception
    assert "the coupling maps below are flat" in app.info[0].value and "agreement map further down is not" in app.info[0].value
