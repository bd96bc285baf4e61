"""Which capsule model the Robustness page shows when the sidebar's does not fit (a MultiMNIST
CapsNet, a CNN): one with a baseline CNN, on the sidebar's digits, routed, and why it was picked."""

from pathlib import Path
from types import SimpleNamespace

import test_app
import torch

from capsviz import checkpoint as ckpt
from capsviz.analysis.robustness import has_baseline, stand_in
from capsviz.config import preset
from capsviz.glossary import help_text
from capsviz.models import build_model

app = test_app.app
router_mode = test_app.router_mode
ROOT = Path(__file__).resolve().parents[1]


def meta(dataset: str, routing: str | None = "dynamic", couplings: str = "dynamic", size: int = 28):
    config = SimpleNamespace(routing=routing, couplings=couplings, in_size=size)
    return SimpleNamespace(dataset=dataset, image_dataset=dataset, config=config)


def test_the_stand_in_has_a_baseline_before_its_name_comes_first():
    every = [
        (Path("a-fashion.safetensors"), meta("fashion-mnist")),  # first by name, but no CNN for clothes
        (Path("b-random-mnist.safetensors"), meta("mnist", couplings="random")),
        (Path("c-mnist.safetensors"), meta("mnist")),
        (Path("d-mnist.safetensors"), meta("mnist")),
        (Path("cnn-mnist.safetensors"), meta("mnist", routing=None)),
    ]
    suitable = [pm for pm in every if pm[1].config.routing is not None]
    sidebar = meta("multimnist", size=36)
    (path, _), why = stand_in(sidebar, suitable, every)
    assert path.name == "c-mnist.safetensors"  # a CNN to compare with, MultiMNIST's own digits, trained with routing
    assert why == (
        "It was picked because a baseline CNN (cnn-mnist) was trained on its images, so the two can be compared; it was "
        "trained on mnist, the images multimnist is made from; it was trained with dynamic routing. Of the 2 models that "
        "fit as well, it is the first by name."
    )
    # without any CNN the page says so, and the sidebar's own dataset comes first
    no_cnn = [pm for pm in every if pm[1].config.routing is not None]
    (path, _), why = stand_in(meta("fashion-mnist", routing=None), no_cnn, no_cnn)
    assert path.name == "a-fashion.safetensors"
    assert why == (
        "It was picked because no model that fits has a baseline CNN to compare with; it was trained on fashion-mnist too; "
        "it was trained with dynamic routing."
    )
    assert has_baseline(meta("mnist"), every) == [Path("cnn-mnist.safetensors")] and has_baseline(meta("fashion-mnist"), every) == []


def test_the_shipped_multimnist_models_stand_in_is_capsnet_mnist():
    every = [(p, ckpt.load_checkpoint(p)[1]) for p in sorted((ROOT / "checkpoints").glob("*.safetensors"))]
    models = dict((p.stem, m) for p, m in every)
    assert "capsnet-mnist" in models and "cnn-small-mnist" in models
    suitable = [(p, m) for p, m in every if m.config.routing is not None and m.config.in_size in (28, 40)]
    for sidebar in [name for name in models if "multimnist" in name]:
        (path, _), why = stand_in(models[sidebar], suitable, every)
        assert path.stem == "capsnet-mnist", sidebar
        assert "a baseline CNN (cnn-small-mnist) was trained on its images" in why and "the images multimnist is made from" in why


def test_robustness_page_says_which_model_stands_in_and_why(app):
    torch.manual_seed(0)
    ckpt.save_checkpoint(
        app.folder / "a-fashion.safetensors",
        build_model(preset("capsnet-small", conv1_channels=16, primary_types=4)),
        {"dataset": "fashion-mnist"},
    )
    app.run().sidebar.selectbox(key="model_pick").set_value("tiny-multimnist.safetensors").run()
    app.switch_page("pages/robustness.py").run()
    assert not app.exception, app.exception
    note = app.info[0].value
    assert "so it shows **tiny-capsnet**" in note and "a-fashion" not in note
    assert "It was picked because a baseline CNN (tiny-cnn) was trained on its images" in note
    assert "the images multimnist is made from" in note
    assert app.selectbox(key="cnn").value == "tiny-cnn.safetensors"
    # the comparison's chance margin is two standard errors, and the glossary's "beyond chance" is beside it
    app.button(key="run_Run the affine sweep").click().run()
    assert not app.exception, app.exception
    said = [m for m in app.markdown if m.value.startswith(("At strength", "Counting the"))]
    assert len(said) == 2 and "within chance (two standard errors on" in said[1].value
    assert all(m.proto.help == help_text("beyond_chance") and "two standard errors" in m.proto.help for m in said)
