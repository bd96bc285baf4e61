"""AppTest over every page with tiny models written by fixtures (no server, no browser)."""

import base64
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from streamlit.testing.v1 import AppTest

from capsviz import checkpoint as ckpt
from capsviz import jobs
from capsviz.analysis.zoo import parameter_counts
from capsviz.config import preset
from capsviz.models import build_model

APP = str(Path(__file__).resolve().parents[1] / "app.py")


def plotly_values(v) -> np.ndarray:
    """A plotly array from a chart's JSON: a list, or plotly's typed array {"dtype", "bdata"}."""
    if isinstance(v, dict):
        return np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"])
    return np.asarray(v, dtype=float)


def tiny_checkpoints(folder: Path) -> None:
    torch.manual_seed(0)
    ckpt.save_checkpoint(
        folder / "tiny-capsnet.safetensors",
        build_model(preset("capsnet-small", conv1_channels=16, primary_types=4)),
        {
            "dataset": "mnist",
            "metrics": {"test_error": 12.5, "n_test": 100, "how": "fixture"},
            "epochs": 1,
            "parameters": 1,
            "hardware": "test",
        },
    )
    ckpt.save_checkpoint(
        folder / "tiny-matrix.safetensors",
        build_model(preset("matrix-small", in_size=28, num_classes=10, A=8, B=4, C=4, D=4)),
        {  # fine-tuned from an 8-epoch run elsewhere: the zoo adds the stages up
            "dataset": "mnist",
            "epochs": 1,
            "training_time_s": 60,
            "hardware": "cpu",
            "started_from": {"file": "first.safetensors", "epochs": 8, "training_time_s": 1140, "hardware": "gpu"},
        },
    )
    ckpt.save_checkpoint(
        folder / "tiny-cnn.safetensors",
        build_model(preset("cnn-small")),
        {"dataset": "mnist", "metrics": {"test_error": 20.0, "n_test": 100, "how": "fixture"}},
    )
    ckpt.save_checkpoint(
        folder / "tiny-multimnist.safetensors",
        build_model(preset("capsnet-small", in_size=36, conv1_channels=16, primary_types=4)),
        {
            "dataset": "multimnist",
            "metrics": {"test_error": 50.0, "n_test": 100, "how": "fixture"},
            "history": [{"epoch": 1, "metrics": {"test_error": 60.0}}, {"epoch": 2, "metrics": {"test_error": 50.0}}],
        },
    )


@pytest.fixture(autouse=True)
def router_mode(monkeypatch):
    """Run AppTest the way a served capsviz runs after its first page load: app.py's st.navigation
    in charge. AppTest resets Streamlit's legacy pages/ flag before every run, which would make
    each run start as a legacy run (the fresh-server deep-link case, covered by tests/e2e)."""
    import streamlit.testing.v1.app_test as app_test_module
    from streamlit.runtime.pages_manager import PagesManager

    class RouterFirst(PagesManager):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            PagesManager.uses_pages_directory = False

    monkeypatch.setattr(app_test_module, "PagesManager", RouterFirst)


def test_every_page_hands_a_fresh_servers_legacy_run_to_the_router():
    """On a fresh server Streamlit runs a deep link's file in pages/ directly, without app.py (its
    legacy multipage folder; the router_mode fixture keeps AppTest from it): every page app.py
    lists calls require_router() before anything else it runs, so app.py routes the link."""
    import ast
    import re

    root = Path(APP).parent
    source = (root / "app.py").read_text()
    listed = set(re.findall(r'st\.Page\("(pages/\w+\.py)"', source)) | set(re.findall(r'^HOME = "(pages/\w+\.py)"', source, re.M))
    assert {"pages/tour.py", "pages/teacher.py", "pages/zoo.py"} <= listed
    for page in sorted(listed):
        body = ast.parse((root / page).read_text()).body
        runs = [n for n in body if isinstance(n, ast.Expr | ast.Assign) and isinstance(n.value, ast.Call)]
        assert runs and ast.unparse(runs[0]) == "require_router()", (page, ast.unparse(runs[0]) if runs else None)


@pytest.fixture
def app(synthetic_data, tmp_path, monkeypatch):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    tiny_checkpoints(folder)
    monkeypatch.setenv("CAPSVIZ_CHECKPOINTS", str(folder))
    at = AppTest.from_file(APP, default_timeout=60)
    at.folder = folder
    return at


def test_zoo_lists_cards_and_squash_plot(app):
    app.switch_page("pages/zoo.py").run()
    assert not app.exception
    assert app.session_state["model_pick"] == "tiny-capsnet.safetensors"
    assert app.query_params["model"] == "tiny-capsnet.safetensors"
    assert app.title[0].value.startswith("capsviz")
    assert [s.value for s in app.subheader] == ["tiny-capsnet", "tiny-cnn", "tiny-matrix", "tiny-multimnist"]
    assert app.metric[1].value == "12.50%"  # [0] is the squash demo
    assert "paper: 0.25% for the full-size model; this one is smaller" in [c.value for c in app.caption]
    cards = " ".join(m.value for m in app.markdown)
    assert "**Epochs** 9 (8 + 1, fine-tuned)" in cards and "**Trained in** 20 min  \n**on** `gpu`, then `cpu`" in cards
    size = parameter_counts(ckpt.load_checkpoint(app.folder / "tiny-capsnet.safetensors")[0])
    assert f"**Parameters** {size.without_decoder:,} without the decoder, {size.with_decoder:,} with" in cards
    guessing = [c.value for c in app.caption if c.value.startswith("Guessing one of 10 classes at random gets 90.00% wrong")]
    assert any("12.50% against 90.00% for guessing, 77.50 points better" in c for c in guessing)  # beside the error the card shows
    from capsviz.analysis.zoo import INTRO

    assert INTRO in [m.value for m in app.markdown]  # the papers' intent for length, not a fact of the models
    app.slider(key="squash").set_value(3.0).run()
    assert app.metric[0].value == "0.900"
    app.button(key="use_tiny-matrix").click().run()
    assert app.sidebar.selectbox(key="model_pick").value == "tiny-matrix.safetensors"
    assert app.query_params["model"] == "tiny-matrix.safetensors"


def test_sidebar_dataset_filters_the_models(app):
    folder = app.folder
    torch.manual_seed(1)
    ckpt.save_checkpoint(
        folder / "fashion.safetensors",
        build_model(preset("capsnet-small", conv1_channels=16, primary_types=4)),
        {"dataset": "fashion-mnist", "epochs": 1},
    )
    app.run()
    assert app.sidebar.selectbox(key="dataset_pick").options == ["all datasets", "fashion-mnist", "mnist", "multimnist"]
    app.sidebar.selectbox(key="dataset_pick").set_value("fashion-mnist").run()
    assert app.sidebar.selectbox(key="model_pick").options == ["fashion.safetensors"]
    assert app.query_params["model"] == "fashion.safetensors"


def sliders_key(app) -> str:
    """The explorer's 16 sliders: a fresh set (key) for every image and capsule."""
    return "sliders:" + app.session_state["dims_view"]


def dims_component(app):
    return next(e for e in app.main if type(e).__name__ == "UnknownElement" and "dimension_sliders" in str(e.proto))


def test_explorer_shows_prediction_and_sliders_change_reconstruction(app):
    app.switch_page("pages/explorer.py").run()
    assert not app.exception, app.exception
    spec = str(dims_component(app).proto)
    assert "-0.25" in spec and "0.05" in spec  # the 16 range inputs' bounds and step
    assert app.session_state[sliders_key(app)]["deltas"] == [0.0] * 16
    imgs = [i.value for i in app.image]
    app.session_state[sliders_key(app)] = {"deltas": [0.0, 0.0, 0.0, 0.25] + [0.0] * 12}  # what the browser sends on a key press
    app.run()
    assert not app.exception
    after = [i.value for i in app.image]
    assert imgs[2] != after[2] and imgs[1] == after[1]  # only the perturbed reconstruction changed
    assert app.image[2].captions == ["perturbed: d3 +0.25"]
    assert any(c.value.startswith("Moving d3 by +0.25") for c in app.caption)  # the measured change, whichever rule holds
    app.session_state[sliders_key(app)] = {"deltas": [0.31, -0.07] + [0.0] * 14}  # off-grid values snap to the 0.05 grid in range
    app.run()
    assert app.query_params["dims"].startswith("0.25,-0.05,0,")
    moved = sliders_key(app)
    app.number_input(key="image").set_value(5).run()
    assert app.query_params["image"] == "5"
    assert sliders_key(app) != moved and app.session_state[sliders_key(app)]["deltas"] == [0.0] * 16  # a new image starts at 0
    assert app.image[2].captions == ["perturbed: none"]
    assert any("go back to 0" in c.value for c in app.caption)


def test_explorer_says_why_extreme_offsets_draw_nothing(real_data, monkeypatch, tmp_path):
    """Shipped CapsNet, test image 2 (a 1): every dimension at +0.25 leaves ~2% of the ink."""
    monkeypatch.delenv("CAPSVIZ_CHECKPOINTS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update({"model": "capsnet-mnist.safetensors", "image": "2", "dims": ",".join(["0.25"] * 16)})
    at.switch_page("pages/explorer.py").run()
    assert not at.exception
    faint = [c.value for c in at.caption if "draws almost nothing" in c.value]
    assert len(faint) == 1 and "% of the ink" in faint[0]
    at.session_state[sliders_key(at)] = {"deltas": [0.25] + [0.0] * 15}
    at.run()
    assert not [c.value for c in at.caption if "draws almost nothing" in c.value]


def test_explorer_explains_matrix_models(app):
    app.run().sidebar.selectbox(key="model_pick").set_value("tiny-matrix.safetensors").run()
    app.switch_page("pages/explorer.py").run()
    assert not app.exception
    note = app.info[0].value
    assert "is a matrix-capsule model; this page needs a CapsNet with a decoder" in note and "so it shows **tiny-capsnet**" in note
    assert app.session_state["model_pick"] == "tiny-matrix.safetensors"


def test_explorer_without_data_says_what_to_do(app, monkeypatch, tmp_path):
    monkeypatch.setenv("CAPSVIZ_DATA_DIR", str(tmp_path / "nothing"))
    app.switch_page("pages/explorer.py").run()
    assert not app.exception
    assert "not available" in app.warning[0].value
    assert "python -m capsviz data --download" in app.code[0].value


def test_no_checkpoints_message(synthetic_data, tmp_path, monkeypatch):
    monkeypatch.setenv("CAPSVIZ_CHECKPOINTS", str(tmp_path / "empty"))
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/explorer.py").run()
    assert not at.exception
    assert "python -m capsviz train" in at.info[0].value


def test_train_page_runs_to_completion_and_model_appears(app):
    app.switch_page("pages/train.py").run()
    assert not app.exception
    assert app.caption[0].value.startswith("estimate: about")  # memory before Start
    assert any("time per epoch is measured on the run itself" in c.value for c in app.caption)
    app.number_input(key="t_limit").set_value(64)
    app.number_input(key="t_batch").set_value(32)
    assert app.selectbox(key="t_device").options[:2] == ["automatic", "CPU"]  # as the select names them; the values stay auto, cpu
    app.selectbox(key="t_device").set_value("cpu")
    app.text_input(key="t_name").set_value("fresh")
    app.number_input(key="t_decay_mnist").set_value(180).run()
    command = next(c.value for c in app.caption if c.value.startswith("Command line"))
    assert "--decay-steps 180" in command and "--train-limit 64" in command
    app.button(key="start_training").click().run()
    job = jobs.current()
    assert job is not None
    jobs.wait(job, 120)
    app.run()
    assert not app.exception
    assert app.success and "Finished" in app.success[0].value
    assert (app.folder / "fresh.safetensors").is_file()
    (error,) = [m.value for m in app.markdown if m.value.startswith("epoch 1: test error")]
    (guessing,) = [
        c.value for c in app.caption if c.value.startswith("Guessing one of 10 classes at random gets 90.00% wrong (1 - 1/10): ")
    ]
    shown = error.split("**")[1]  # each error says what guessing gets, and quotes that very error
    assert f": {shown} against 90.00% for guessing, " in guessing and any(
        w in guessing for w in ("points better", "points worse", "no better")
    )
    meta_run = ckpt.read_meta(app.folder / "fresh.safetensors").run
    assert meta_run["device"] == "cpu" and meta_run["decay_steps"] == 180
    app.switch_page("pages/zoo.py").run()
    assert "fresh" in [s.value for s in app.subheader]


def test_routing_page_iterations_change_the_figures(app):
    import json

    app.run()
    app.switch_page("pages/routing.py").run()
    assert not app.exception
    assert app.title[0].value.startswith("Dynamic routing")
    charts = {c.proto.id: c for c in app.get("plotly_chart")}
    assert len(charts) >= 6
    first = json.loads(app.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"]
    assert first.startswith("Iteration 3")
    app.slider(key="t").set_value(1).run()
    assert not app.exception
    assert json.loads(app.get("plotly_chart")[0].proto.spec)["layout"]["title"]["text"].startswith("Iteration 1")
    assert "Paper (Fig. A.1)" in app.caption[-1].value or any("Paper (Fig. A.1)" in c.value for c in app.caption)


def test_routing_once_has_no_iteration_to_step_through_and_says_so(app):
    app.query_params.update({"model": "tiny-capsnet.safetensors", "iterations": "1"})
    app.switch_page("pages/routing.py").run()
    assert not app.exception
    assert app.slider(key="iterations").value == 1
    assert not [s for s in app.slider if s.key == "t"]  # a 1-to-1 slider cannot be drawn
    assert "Routing runs once here" in app.info[0].value
    captions = " ".join(c.value for c in app.caption)
    assert (
        "At iteration 1 every coupling is 0.100: nothing has been routed yet" in captions
        and "with one iteration nothing is shifted" in captions
    )
    app.slider(key="iterations").set_value(2).run()
    assert app.slider(key="t").value == 2 and "nothing has been routed yet" not in " ".join(c.value for c in app.caption)


def test_em_page_shows_histograms_for_a_matrix_model(app):
    app.run().sidebar.selectbox(key="model_pick").set_value("tiny-matrix.safetensors").run()
    app.switch_page("pages/em.py").run()
    assert not app.exception
    assert len(app.get("plotly_chart")) == 5  # the histograms are an image now (tests/test_explain_app.py)
    app.toggle(key="zoom").set_value(True).run()
    app.slider(key="t").set_value(1).run()
    assert not app.exception


def test_routing_pages_explain_the_wrong_family(app):
    app.run()
    app.switch_page("pages/em.py").run()
    assert "needs matrix capsules with EM routing, so it shows **tiny-matrix**" in app.info[0].value
    app.run().sidebar.selectbox(key="model_pick").set_value("tiny-matrix.safetensors").run()
    app.switch_page("pages/routing.py").run()
    assert "needs a CapsNet or Efficient-CapsNet, whose routing it shows, so it shows **tiny-capsnet**" in app.info[0].value
    assert not app.exception


def test_a_shared_link_opens_the_same_explorer_view(app):
    app.query_params.update({"model": "tiny-capsnet.safetensors", "image": "4", "capsule": "2", "dims": "0,0,0.1,0,-0.25"})
    app.switch_page("pages/explorer.py").run()
    assert not app.exception
    assert app.number_input(key="image").value == 4
    assert app.selectbox[1].label == "Capsule to decode" and app.selectbox[1].value == 2
    assert app.session_state[sliders_key(app)]["deltas"][:5] == pytest.approx([0, 0, 0.1, 0, -0.25])
    assert app.image[2].captions == ["perturbed: d2 +0.10, d4 -0.25"]
    app.session_state[sliders_key(app)] = {"deltas": [0.05, 0, 0.1, 0, -0.25] + [0.0] * 11}
    app.run()
    assert app.query_params["dims"].startswith("0.05,0,0.1,0,-0.25")


def test_misclassified_picker_lands_on_a_mistake(app):
    import numpy as np

    from capsviz.analysis import predict
    from capsviz.checkpoint import load_checkpoint
    from capsviz.data import load_split

    app.switch_page("pages/explorer.py").run()
    app.button(key="wrong_image").click().run()
    assert not app.exception
    i = app.number_input(key="image").value
    model, _ = load_checkpoint(app.folder / "tiny-capsnet.safetensors")
    data = load_split("mnist", "test")
    assert predict(model, data.images[i].numpy().astype(np.float32) / 255).predicted != int(data.labels[i])


def test_paper_size_is_recognised():
    from capsviz.analysis.reproduction import is_paper_size
    from capsviz.config import PRESETS, preset
    from capsviz.schema import CheckpointMeta

    def meta(config, dataset=None):
        return CheckpointMeta(config, "", dataset)

    assert is_paper_size(meta(PRESETS["capsnet"]))
    assert is_paper_size(meta(preset("capsnet", routing_iterations=1, reconstruction=False)))
    assert is_paper_size(meta(preset("matrix", in_size=28, num_classes=10)))
    assert is_paper_size(meta(PRESETS["cnn-mnist"]))
    assert not is_paper_size(meta(PRESETS["cnn-small"], "mnist"))  # the smallNORB paper's CNN
    assert not is_paper_size(meta(PRESETS["capsnet-small"]))
    assert not is_paper_size(meta(PRESETS["matrix-small"]))


def test_routing_traces_follow_a_checkpoint_retrained_under_the_same_name(app):
    def lengths_chart():
        for c in app.get("plotly_chart"):
            spec = json.loads(c.proto.spec)
            if spec["layout"]["title"]["text"] == "Lengths by iteration":
                return np.concatenate([plotly_values(t["y"]) for t in spec["data"]])
        raise AssertionError("no lengths chart")

    app.run()
    app.switch_page("pages/routing.py").run()
    before = lengths_chart()
    torch.manual_seed(123)  # same name, new weights: what a finished training run does
    ckpt.save_checkpoint(
        app.folder / "tiny-capsnet.safetensors",
        build_model(preset("capsnet-small", conv1_channels=16, primary_types=4)),
        {"dataset": "mnist"},
    )
    app.run()
    assert not app.exception
    assert not np.allclose(before, lengths_chart())


def test_multimnist_page_overlays_segments_and_measures(app):
    app.run().sidebar.selectbox(key="model_pick").set_value("tiny-multimnist.safetensors").run()
    app.switch_page("pages/multimnist.py").run()
    assert not app.exception, app.exception
    i1, i2 = app.number_input(key="pair_i1").value, app.number_input(key="pair_i2").value
    assert app.query_params["pair"].startswith(f"{i1},{i2},")
    captions = [c for i in app.image for c in i.captions]
    assert any(c.startswith("input: labels ") for c in captions) and any(c.startswith("red: capsule ") for c in captions)
    before = [i.value for i in app.image]
    app.number_input(key="pair_dx2").set_value(4).run()
    assert not app.exception
    assert [i.value for i in app.image][0] != before[0]  # a new overlay
    red = next(s for s in app.selectbox if s.label.startswith("Red"))
    red.set_value((red.value + 1) % 10).run()
    assert app.query_params["caps"].split(",")[0] == str((red.value) % 10)
    app.button(key="run_Measure accuracy").click().run()
    assert not app.exception, app.exception
    assert app.metric[0].label == "Pair error" and app.metric[0].value.endswith("%")
    app.button(key="random_pair").click().run()
    assert not app.exception
    chosen = app.query_params["pair"]
    app.switch_page("pages/zoo.py").run()
    app.query_params.pop("pair", None)  # the sidebar's page links carry no ?pair=
    app.switch_page("pages/multimnist.py").run()
    assert app.query_params["pair"] == chosen  # the pair survives a visit to another page


def test_multimnist_page_on_a_model_trained_without_routing_says_its_routing_section_runs_dynamic_routing(app):
    cfg = preset("capsnet-small", in_size=36, conv1_channels=16, primary_types=4, couplings="random")
    ckpt.save_checkpoint(app.folder / "tiny-mm-random.safetensors", build_model(cfg), {"dataset": "multimnist"})
    app.query_params["model"] = "tiny-mm-random.safetensors"
    app.switch_page("pages/multimnist.py").run()
    assert not app.exception, app.exception
    note = " ".join(i.value for i in app.info)
    assert "**tiny-mm-random** was trained with fixed random couplings" in note and "runs its capsules with dynamic routing" in note


def test_multimnist_page_offers_a_fitting_model(app):
    app.switch_page("pages/multimnist.py").run()
    note = app.info[0].value
    assert "**tiny-capsnet**, the model in the sidebar" in note and "needs a CapsNet trained on MultiMNIST" in note
    assert "so it shows **tiny-multimnist**" in note and app.number_input(key="pair_i1") is not None  # shown at once
    assert app.session_state["model_pick"] == "tiny-capsnet.safetensors"  # the sidebar's pick is the user's
    app.button(key="switch_tiny-multimnist").click().run()
    assert app.session_state["model_pick"] == "tiny-multimnist.safetensors"
    assert not app.exception and app.number_input(key="pair_i1") is not None


def test_robustness_page_compares_with_the_cnn(app):
    app.switch_page("pages/robustness.py").run()
    assert not app.exception, app.exception
    assert app.selectbox(key="cnn").value == "tiny-cnn.safetensors"
    charts = [c for c in app.get("plotly_chart")]
    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in charts]
    assert any(t.startswith("tiny-capsnet:") for t in titles) and any(t.startswith("tiny-cnn:") for t in titles)
    app.slider(key="rotate").set_value(45).run()
    assert not app.exception
    app.button(key="run_Run the affine sweep").click().run()
    assert not app.exception, app.exception
    sweep = next(
        json.loads(c.proto.spec) for c in app.get("plotly_chart") if "transformed" in json.loads(c.proto.spec)["layout"]["title"]["text"]
    )
    assert [d["name"] for d in sweep["data"]] == ["tiny-capsnet", "tiny-cnn"] and len(sweep["data"][0]["x"]) == 9
    app.select_slider(key="attack_images").set_value(50).run()
    app.button(key="run_Run the attack sweep").click().run()
    assert not app.exception, app.exception
    adv = next(json.loads(c.proto.spec) for c in app.get("plotly_chart") if "FGSM" in json.loads(c.proto.spec)["layout"]["title"]["text"])
    acc = plotly_values(adv["data"][0]["y"])
    assert len(acc) == 7 and all(0 <= a <= 100 for a in acc)
    assert any("zero input gradients" in m.value for m in app.markdown)
    # the EM paper's claim is about matrix capsules: the matrix model is attacked beside the CapsNet, each set against the CNN
    assert [d["name"] for d in adv["data"]] == ["tiny-capsnet", "tiny-cnn", "tiny-matrix"]
    said = [m.value for m in app.markdown if m.value.startswith("At epsilon")]
    assert len(said) == 2 and "**tiny-capsnet** and **tiny-cnn**" in said[0] and "**tiny-matrix** and **tiny-cnn**" in said[1]


def test_reproduction_page_fills_table_from_metadata(app):
    metrics = {"test_error": 3.0, "n_test": 10000, "how": "test"}
    matrix = build_model(preset("matrix-small", in_size=28, num_classes=10, A=8, B=4, C=4, D=4))
    ckpt.save_checkpoint(app.folder / "tiny-em.safetensors", matrix, {"dataset": "mnist", "epochs": 1, "metrics": metrics})
    app.switch_page("pages/reproduction.py").run()
    assert not app.exception, app.exception
    table = next(m.value for m in app.markdown if m.value.startswith("| method"))
    cnn = next(line for line in table.splitlines() if line.startswith("| baseline CNN"))
    assert "**20.00** †" in cnn and "0.39" in cnn  # tiny-cnn's stored error beside the paper's
    r3 = next(line for line in table.splitlines() if line.startswith("| CapsNet | 3 | yes"))
    assert "**12.50** †" in r3 and "**50.00** †" in r3 and "0.25" in r3 and "5.2" in r3
    assert any("--routing-iterations 1" in c.value for c in app.code)
    em = next(m.value for m in app.markdown if m.value.startswith("| dataset"))
    mnist = next(line for line in em.splitlines() if line.startswith("| MNIST"))
    assert "3.00 † (`tiny-em.safetensors`)" in mnist  # smaller than the paper's matrix model


def test_the_image_survives_a_page_change(app):
    app.switch_page("pages/explorer.py").run()
    app.number_input(key="image").set_value(7).run()
    for page in ("routing", "tour", "explorer"):
        app.switch_page(f"pages/{page}.py").run()
        assert not app.exception
        assert app.number_input(key="image").value == 7, page
        assert app.query_params["image"] == "7"


def test_iterations_beyond_the_next_pages_range_are_brought_within_it(app):
    app.switch_page("pages/routing.py").run()
    app.slider(key="iterations").set_value(9).run()
    app.slider(key="iterations").set_value(2).run()  # "Show iteration" had 9
    assert not app.exception and app.slider(key="t").value == 2
    app.slider(key="iterations").set_value(8).run()
    app.sidebar.selectbox(key="model_pick").set_value("tiny-matrix.safetensors").run()
    app.switch_page("pages/em.py").run()
    assert not app.exception, app.exception
    assert app.slider(key="iterations").value == 5  # EM's most


def test_pages_the_static_site_has_link_to_its_view_of_the_same_model_and_image(app, monkeypatch):
    monkeypatch.setenv("CAPSVIZ_SITE_URL", "https://example.org/course/capsviz/")
    app.query_params["image"] = "5"
    app.switch_page("pages/explorer.py").run()
    assert not app.exception, app.exception
    (button,) = app.get("link_button")
    url = button.proto.url
    assert url.startswith("https://example.org/course/capsviz/?view=explore&")
    assert f"model={app.session_state['model_pick']}" in url and "image=5" in url and "capsule=" in url
    app.switch_page("pages/zoo.py").run()  # a page the site does not have: no link
    assert not app.get("link_button")


def link_notes(app) -> list[str]:
    """The notes a page shows about its link (plain text, as a reader sees it)."""
    return [i.value.replace("\\", "") for i in app.info if "The link asks for" in i.value]


@pytest.mark.parametrize(
    ("page", "params", "key", "shown", "said"),
    [
        ("explorer", {"image": "99999999"}, "image", None, "test image 99,999,999, but here the largest is"),
        ("routing", {"image": "-5"}, "image", 0, "test image -5, but here the smallest is 0; this page shows test image 0."),
        ("tour", {"image": "abc"}, "image", 0, "test image “abc”, which is not a number; this page shows test image 0."),
        ("routing", {"iterations": "999"}, "iterations", 10, "routing iterations 999, but here the largest is 10"),
        ("routing", {"iterations": "many"}, "iterations", 3, "“many”, which is not a number; this page shows routing iterations 3."),
        ("routing", {"iterations": "3", "t": "7"}, "t", 3, "iteration 7, but here the largest is 3; this page shows iteration 3."),
        ("em", {"model": "tiny-matrix.safetensors", "iterations": "0"}, "iterations", 1, "EM iterations 0, but here the smallest is 1"),
        ("em", {"model": "tiny-matrix.safetensors", "iterations": "2", "t": "9"}, "t", 2, "iteration 9, but here the largest is 2"),
        (
            "em",
            {"model": "tiny-matrix.safetensors", "position": "5000"},
            "position",
            None,
            "output position 5,000, but here the largest is",
        ),
    ],
)
def test_a_link_value_out_of_range_or_malformed_is_brought_into_range_and_said(app, page, params, key, shown, said):
    app.query_params.update(params)
    app.switch_page(f"pages/{page}.py").run()
    assert not app.exception, app.exception
    widget = app.number_input(key=key) if key == "image" else app.slider(key=key)
    if shown is None:  # the largest the widget allows
        shown = int(widget.max)
    assert widget.value == shown
    (note,) = [n for n in link_notes(app) if said in n]
    assert note.endswith(f" {shown:,}.")  # what the page shows, named
    app.run()  # the note stays while the page shows what it says ...
    assert any(said in n for n in link_notes(app))
    if key != "image":
        lo = widget.min
        app.slider(key=key).set_value(lo if shown != lo else widget.max).run()
        assert not any(said in n for n in link_notes(app))  # ... and goes once the user picks another


def test_a_link_value_in_range_is_shown_without_a_note(app):
    app.query_params.update({"image": "3", "iterations": "2", "t": "1"})
    app.switch_page("pages/routing.py").run()
    assert not app.exception
    assert app.number_input(key="image").value == 3 and app.slider(key="iterations").value == 2 and app.slider(key="t").value == 1
    assert not link_notes(app)


def test_the_tour_says_which_step_it_shows_for_a_step_it_does_not_have(app):
    app.query_params.update({"step": "99"})
    app.switch_page("pages/tour.py").run()
    assert not app.exception
    (note,) = link_notes(app)
    n = int(note.split("the largest is ")[1].split(";")[0])
    assert "step 99" in note and note.endswith(f"shows step {n}.")
    assert app.session_state["tour_step"] == n and app.query_params["step"] == str(n)
    app.button(key="tour_back").click().run()
    assert not link_notes(app)


def test_the_explorer_says_what_it_shows_for_a_linked_capsule_or_offsets_it_cannot_show(app):
    app.query_params.update({"model": "tiny-capsnet.safetensors", "image": "4", "capsule": "12", "dims": "0.9,0,x"})
    app.switch_page("pages/explorer.py").run()
    assert not app.exception, app.exception
    notes = " ".join(link_notes(app))
    assert "capsule 12, but here the largest is 9; this page shows capsule 9." in notes
    assert "d0 0.9, but here the largest is 0.25" in notes and "d2 “x”, which is not a number" in notes
    assert app.query_params["capsule"] == "9" and app.query_params["dims"].startswith("0.25,0,0,")


def test_the_glossary_finds_the_papers_terms_first_and_shows_their_other_names(app):
    from capsviz.glossary import TERMS, entries

    app.query_params["term"] = "coupling coefficient"
    app.switch_page("pages/glossary.py").run()
    assert not app.exception
    shown = [m.value for m in app.markdown if m.value.startswith("**")]
    assert shown[0].startswith("**c_ij (coupling)**") and len(shown) == len(entries("coupling coefficient"))
    assert "coupling coefficient" in app.caption[0].value
    app.text_input(key="term").set_value("EM").run()
    shown = [m.value for m in app.markdown if m.value.startswith("**")]
    for key in ("em_routing", "E_step", "M_step", "R"):
        assert any(s.startswith(f"**{TERMS[key].named}**") for s in shown), key


@pytest.mark.parametrize(
    ("page", "params", "widget", "key", "shown", "said"),
    [
        ("robustness", {"rotate": "720"}, "slider", "rotate", 90, "rotate (degrees) 720, but here the largest is 90"),
        ("robustness", {"scale": "0.1"}, "slider", "scale", 0.5, "scale 0.1, but here the smallest is 0.5"),
        (
            "robustness",
            {"right": "1.5"},
            "slider",
            "right",
            1,
            "move right (px) 1.5, which is not a whole number; this page shows move right (px) 1.",
        ),
        ("robustness", {"down": "x"}, "slider", "down", 0, "move down (px) “x”, which is not a number; this page shows move down (px) 0."),
        ("lab", {"lab_test": "7"}, "select_slider", "lab_test", 10000, "test images “7”, which this page does not offer"),
        ("lab", {"lab_epsilon": "0.9"}, "select_slider", "lab_epsilon", 0.1, "FGSM epsilon “0.9”, which this page does not offer"),
        ("playground", {"J": "7"}, "radio", "pg_dynamic_J", 2, "upper capsules “7”, which this page does not offer (2, 3)"),
        ("playground", {"T": "0"}, "slider", "pg_dynamic_T", 3, "routing iterations “0”, which this page does not offer"),
    ],
)
def test_other_pages_bring_a_link_value_into_range_and_say_so(app, page, params, widget, key, shown, said):
    app.query_params.update(params)
    app.switch_page(f"pages/{page}.py").run()
    assert not app.exception, app.exception
    assert getattr(app, widget)(key=key).value == shown
    assert any(said in n for n in link_notes(app)), link_notes(app)


def test_multimnist_brings_a_linked_pair_within_the_test_set_and_the_shifts(app):
    app.query_params.update({"model": "tiny-multimnist.safetensors", "pair": "99999,3,9,0,0,-1"})
    app.switch_page("pages/multimnist.py").run()
    assert not app.exception, app.exception
    n = int(app.number_input(key="pair_i1").max)
    assert app.query_params["pair"] == f"{n},3,4,0,0,-1"
    (note,) = link_notes(app)
    assert f"first digit 99,999, but here the largest is {n:,}" in note and "dy 1 9, but here the largest is 4" in note


@pytest.mark.parametrize(
    ("page", "params", "said"),
    [
        ("robustness", {"attack": "pgd"}, "attack “pgd”, which this page does not offer (FGSM, BIM); this page shows “FGSM”."),
        (
            "robustness",
            {"targeted": "maybe"},
            "targeted “maybe”, which this page does not offer (false, true); this page shows “false”.",
        ),
        (
            "robustness",
            {"cnn": "big-cnn.safetensors"},
            "baseline CNN “big-cnn.safetensors”, which this page does not offer (tiny-cnn.safetensors); this page shows “tiny-cnn.safetensors”.",
        ),
        (
            "robustness",
            {"tab": "Noise"},
            "tab “Noise”, which this page does not offer (Affine transforms, Adversarial attacks); this page shows “Affine transforms”.",
        ),
        ("robustness", {"attack_images": "7"}, "test images “7”, which this page does not offer"),
        ("robustness", {"affine_images": "x"}, "test images “x”, which this page does not offer"),
        ("lab", {"lab_models": "big-capsnet"}, "models “big-capsnet”, which this page does not offer (“tiny-capsnet”"),
        ("lab", {"lab_routings": "magic"}, "routings “magic”, which this page does not offer ("),
        (
            "em",
            {"model": "tiny-matrix.safetensors", "layer": "convcaps9"},
            "layer “convcaps9”, which this page does not offer (convcaps1, convcaps2); this page shows “convcaps1”.",
        ),
        ("em", {"model": "tiny-matrix.safetensors", "zoom": "yes"}, "zoom on the nearest votes “yes”, which this page does not offer"),
        ("routing", {"model": "tiny-capsnet.safetensors", "capsule": "zebra"}, "“zebra”, which this page does not offer (0, 1, 2"),
        ("playground", {"t": "x"}, "iteration “x”, which is not a number; this page shows iteration 3."),
        ("playground", {"t": "9"}, "iteration 9, but here the largest is 3; this page shows iteration 3."),
        ("playground", {"pts": "1_2_x"}, "points “1_2_x”, which this page cannot read; this page shows the preset's points."),
        ("playground", {"acts": "0.5"}, "activations “0.5”, which this page cannot read; this page shows the preset's activations."),
        (
            "playground",
            {"toy": "boxes"},
            "playground “boxes”, which this page does not offer (Routing by agreement (dynamic routing), EM routing (matrix capsules)); this page shows “Routing by agreement (dynamic routing)”.",
        ),
        (
            "playground",
            {"rule": "magic"},
            "routing “magic”, which this page does not offer (routing by agreement (iterations), self-attention (one pass)); this page shows “routing by agreement (iterations)”.",
        ),
        ("multimnist", {"model": "tiny-multimnist.safetensors", "caps": "3"}, "“3”, which is not 2 numbers (red capsule, green capsule)"),
        ("multimnist", {"model": "tiny-multimnist.safetensors", "caps": "3,12"}, "green capsule 12, but here the largest is 9"),
        ("multimnist", {"model": "tiny-multimnist.safetensors", "mm_alone": "third digit"}, "digit routed alone “third digit”"),
        ("multimnist", {"model": "tiny-multimnist.safetensors", "pairs_measured": "3"}, "pairs “3”, which this page does not offer"),
        ("reproduction", {"curves": "cifar"}, "dataset “cifar”, which this page does not offer"),
        ("zoo", {"squash": "9"}, "length |s| 9, but here the largest is 5; this page shows length |s| 5."),
    ],
)
def test_an_odd_choice_in_a_link_is_said_with_what_the_page_shows(app, page, params, said):
    app.query_params.update(params)
    app.switch_page(f"pages/{page}.py").run()
    assert not app.exception, app.exception
    assert any(said in n for n in link_notes(app)), link_notes(app)
    app.run()  # the note stays while the page shows what it says
    assert any(said in n for n in link_notes(app)), link_notes(app)


def test_an_odd_choice_shows_the_default_and_its_note_goes_once_the_user_picks(app):
    app.query_params.update({"model": "tiny-matrix.safetensors", "layer": "convcaps9", "zoom": "yes"})
    app.switch_page("pages/em.py").run()
    assert not app.exception, app.exception
    assert app.selectbox(key="layer").value == "convcaps1" and app.toggle(key="zoom").value is False
    assert len(link_notes(app)) == 2
    app.selectbox(key="layer").set_value("convcaps2").run()
    assert [n for n in link_notes(app) if "layer" in n] == []
    app.toggle(key="zoom").set_value(True).run()
    assert not link_notes(app)


def test_an_odd_choice_among_good_ones_leaves_the_good_ones_and_names_the_odd(app):
    from capsviz.analysis.lab import LAB_ROUTINGS

    app.query_params.update({"lab_routings": [LAB_ROUTINGS["dynamic"], "magic"]})  # the address names each by its words
    app.switch_page("pages/lab.py").run()
    assert not app.exception, app.exception
    assert app.multiselect(key="lab_routings").value == ["dynamic"]
    (note,) = link_notes(app)
    assert "routings “magic”, which this page does not offer (" in note and note.endswith(f"shows routings “{LAB_ROUTINGS['dynamic']}”.")
    app.multiselect(key="lab_routings").select("uniform").run()
    assert not link_notes(app)


@pytest.mark.parametrize(
    ("page", "params", "widget", "key", "shown"),
    [
        ("robustness", {"tab": "Adversarial attacks", "attack": "BIM", "targeted": "true"}, "radio", "attack", "bim"),
        ("robustness", {"tab": "Adversarial attacks", "attack": "bim"}, "radio", "attack", "bim"),  # as typed by hand
        ("robustness", {"targeted": "TRUE"}, "toggle", "targeted", True),
        ("robustness", {"cnn": "tiny-cnn.safetensors"}, "selectbox", "cnn", "tiny-cnn.safetensors"),
        ("em", {"model": "tiny-matrix.safetensors", "layer": "convcaps2", "zoom": "true"}, "selectbox", "layer", "convcaps2"),
        ("routing", {"model": "tiny-capsnet.safetensors", "capsule": "7"}, "selectbox", "capsule", 7),
        (
            "multimnist",
            {"model": "tiny-multimnist.safetensors", "caps": "3,5", "mm_alone": "second digit"},
            "radio",
            "mm_alone",
            "second digit",
        ),
        ("playground", {"t": "2", "pts": "", "toy": "dynamic"}, "slider", "pg_t", 2),
        ("lab", {"lab_models": "tiny-capsnet"}, "multiselect", "lab_models", ["tiny-capsnet"]),
    ],
)
def test_a_choice_the_page_offers_is_shown_without_a_note(app, page, params, widget, key, shown):
    app.query_params.update(params)
    app.switch_page(f"pages/{page}.py").run()
    assert not app.exception, app.exception
    assert getattr(app, widget)(key=key).value == shown
    assert not link_notes(app), link_notes(app)
