"""Every page with a model trained on a user's own colour images (issue 33): the real flow, a
folder of class folders, `capsviz.train` for a few steps, then each page opened on that model."""

from pathlib import Path

import numpy as np
import pytest
import streamlit as st
from PIL import Image
from streamlit.testing.v1 import AppTest
from test_app import router_mode  # noqa: F401 - AppTest with app.py's router in charge, as served
from test_plain_text import as_shown

from capsviz.config import TrainRun
from capsviz.train import train

APP = str(Path(__file__).resolve().parents[1] / "app.py")
NAMES = ("circle", "square", "stripe")
CAPSNET = "shapes-capsnet.safetensors"
MATRIX = "shapes-matrix.safetensors"


def shape_images(n_per_class: int, seed: int = 0):
    """32x32 RGB: a red disc, a green square or blue stripes, at a random place on dim noise."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[:32, :32]
    out = []
    for k, name in enumerate(NAMES):
        for _ in range(n_per_class):
            a = (rng.random((32, 32, 3)) * 40).astype(np.uint8)
            r, c = rng.integers(8, 24, 2)
            if name == "circle":
                a[(yy - r) ** 2 + (xx - c) ** 2 < 36] = (230, 40, 40)
            elif name == "square":
                a[r - 6 : r + 6, c - 6 : c + 6] = (40, 220, 40)
            else:
                a[(xx + r) % 8 < 3] = (40, 60, 240)
            out.append((k, a))
    return out


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A shapes folder and two models trained on it for a few steps: a CapsNet and matrix capsules."""
    root = tmp_path_factory.mktemp("colour")
    data = root / "shapes"
    for i, (k, a) in enumerate(shape_images(12)):
        (data / NAMES[k]).mkdir(parents=True, exist_ok=True)
        Image.fromarray(a).save(data / NAMES[k] / f"{i:03d}.png")
    models = root / "models"
    models.mkdir()
    spec = f"folder:{data}"
    train(TrainRun(model="capsnet-small", dataset=spec, epochs=1, batch_size=8, train_limit=16, test_limit=8), models / CAPSNET)
    train(TrainRun(model="matrix-small", dataset=spec, epochs=1, batch_size=8, train_limit=8, test_limit=4), models / MATRIX)
    return models, data


@pytest.fixture
def app(trained, monkeypatch):
    models, _ = trained
    monkeypatch.setenv("CAPSVIZ_CHECKPOINTS", str(models))
    return AppTest.from_file(APP, default_timeout=120)


def texts(at) -> str:
    parts = [e.value for kind in ("markdown", "caption", "info", "warning", "error", "subheader", "title") for e in getattr(at, kind)]
    for sb in at.selectbox:
        parts += [str(o) for o in sb.options]
    return " ".join(map(str, parts))


def open_page(at, page: str, model: str = CAPSNET):
    at.query_params["model"] = model
    at.switch_page(page).run()
    assert not at.exception, at.exception
    return at


@pytest.mark.parametrize(
    "page", ["tour", "explorer", "routing", "robustness", "lab", "zoo", "reproduction", "glossary", "multimnist", "playground", "train"]
)
def test_every_page_opens_on_a_colour_model_with_its_class_names(app, page):
    open_page(app, f"pages/{page}.py")
    if page in ("explorer", "routing", "robustness", "zoo"):
        assert "circle" in texts(app), page


def test_the_tour_and_the_routing_page_call_a_colour_models_capsules_class_capsules(app):
    open_page(app, "pages/tour.py")
    said = []
    while True:
        said.append(app.get("progress")[0].proto.text + " " + texts(app))
        if app.button(key="tour_next").disabled:
            break
        app.button(key="tour_next").click().run()
        assert not app.exception, app.exception
    said = " ".join(said)
    assert len(said) > 2000 and "class capsule" in said and "The answer is the longest class capsule: **" in said
    assert "digit capsule" not in said.lower() and "DigitCaps:" not in said and "redraws the digit" not in said
    open_page(app, "pages/routing.py")
    said = texts(app) + " " + " ".join(s.label for s in app.selectbox)
    assert "Class capsule for the detailed map" in said and "digit" not in said.lower()


def test_em_page_on_a_colour_matrix_model(app):
    open_page(app, "pages/em.py", MATRIX)
    assert "stripe" in texts(app)


def test_explorer_reconstructs_in_colour(app):
    open_page(app, "pages/explorer.py")
    assert app.image, "the explorer shows the input and its reconstructions"
    assert any(i.value for i in app.image)


def test_the_core_redraws_a_colour_capsule_in_colour(trained):
    from capsviz.analysis import decode, image_at, perturbation_grid, predict
    from capsviz.checkpoint import load_checkpoint
    from capsviz.data import model_test_set
    from capsviz.viz import to_image

    models, _ = trained
    model, meta = load_checkpoint(models / CAPSNET)
    data = model_test_set(meta.image_dataset, meta.config.in_size, meta.config.in_channels)
    image = image_at(data.images, 0)  # (3, 32, 32)
    pred = predict(model, image)
    assert pred.reconstruction.shape == (3, 32, 32)
    rec = decode(model, pred.capsules[0], 0)
    img = to_image(rec)
    assert img.mode == "RGB" and img.size == (32 * 6, 32 * 6)
    grid = perturbation_grid(model, pred.capsules[0], 0)
    assert grid.shape == (16, 11, 3, 32, 32)


def test_the_zoo_card_names_the_classes_and_the_folder(trained, app):
    open_page(app, "pages/zoo.py")
    cards = as_shown(texts(app))
    assert "folder:shapes" in cards and "3 classes: circle, square, stripe; 32x32 colour images" in cards
    assert str(trained[1]) not in cards + " ".join(app.sidebar.selectbox(key="dataset_pick").options)  # the server's paths stay there


def test_the_lab_measures_a_colour_model(app):
    open_page(app, "pages/lab.py")
    app.multiselect(key="lab_routings").set_value(["dynamic", "uniform"]).run()
    app.button(key="run_Run the lab").click().run()
    assert not app.exception, app.exception
    assert app.dataframe, "the lab's table"
    table = app.dataframe[0].value
    assert set(table["model"]) == {"shapes-capsnet"}


def test_robustness_sweeps_and_attacks_a_colour_model(app):
    open_page(app, "pages/robustness.py")
    assert "No baseline CNN trained on these images" in texts(app)
    app.button(key="run_Run the affine sweep").click().run()
    assert not app.exception, app.exception
    app.button(key="run_Run the attack sweep").click().run()
    assert not app.exception, app.exception
    shown = texts(app) + " ".join(c for i in app.image for c in (i.captions or []))
    assert "→" in shown and "circle" in shown


def test_a_missing_images_folder_is_said_and_uploads_still_work(trained, app, tmp_path):
    models, data = trained
    moved = data.with_name("shapes-away")
    data.rename(moved)
    st.cache_resource.clear()  # a server that had read them keeps them in memory
    try:
        open_page(app, "pages/explorer.py")
        said = as_shown(texts(app))
        assert "folder:shapes" in said and "not available on this server" in said
        assert str(data) not in said
        assert app.radio(key="source").value == "Upload"
    finally:
        moved.rename(data)


def test_uploads_and_drawings_are_made_the_models_size_and_channels():
    import io

    from capsviz.data.transforms import fit_drawing, picture_to_input
    from capsviz.errors import CapsvizError

    buf = io.BytesIO()
    Image.new("RGB", (90, 60), (200, 30, 30)).save(buf, format="PNG")
    colour = picture_to_input(buf.getvalue(), 32, 3)
    assert colour.shape == (3, 32, 32) and colour.dtype == np.float32
    assert abs(colour[0].mean() - 200 / 255) < 0.01 and colour[1].mean() < 0.2  # red stays red
    assert picture_to_input(buf.getvalue(), 20, 1).shape == (20, 20)
    drawn = np.zeros((28, 28), np.float32)
    drawn[10:18, 10:18] = 1
    made = fit_drawing(drawn, 32, 3)
    assert made.shape == (3, 32, 32) and np.array_equal(made[0], made[2]) and made.max() > 0.9
    with pytest.raises(CapsvizError, match="not a picture"):
        picture_to_input(b"not an image", 32, 3)
