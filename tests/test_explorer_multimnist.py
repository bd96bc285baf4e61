"""/explorer with a shipped MultiMNIST model (36x36 canvases), on the real data (third student walk,
F4): a test digit is offered first, centred on the model's canvas with a note and a link to the
MultiMNIST page; the lengths are the model's on that canvas, the sliders redraw, and drawing or
uploading a single digit is offered too, with no exception."""

from pathlib import Path

import numpy as np
import torch
from streamlit.testing.v1 import AppTest
from test_app import dims_component, router_mode, sliders_key  # noqa: F401 - app.py's router in charge, as served

from capsviz.analysis.routing import centred, on_canvas
from capsviz.checkpoint import load_checkpoint
from capsviz.data import load_split

ROOT = Path(__file__).resolve().parents[1]
MODEL = "capsnet-multimnist.safetensors"


def test_the_explorer_shows_a_test_digit_on_a_multimnist_models_canvas(real_data, monkeypatch, tmp_path):
    monkeypatch.setenv("CAPSVIZ_CHECKPOINTS", str(ROOT / "checkpoints"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    app = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    app.query_params["model"] = MODEL
    app.switch_page("pages/explorer.py").run()
    assert not app.exception, app.exception
    assert app.radio(key="source").value == "Test set" and app.number_input(key="image").value == 0  # a way in at once
    assert any("Here it reads one digit alone, centred on that canvas" in i.value for i in app.info)
    assert any('page: "multimnist"' in str(link.proto) for link in app.get("page_link"))
    assert not any("not available" in i.value for i in app.info) and not app.error

    # the lengths the page offers are the model's own, on test digit 0 centred on its 36x36 canvas
    model, meta = load_checkpoint(ROOT / "checkpoints" / MODEL)
    pad = on_canvas(meta.image_dataset, meta.config.in_size)
    digit = load_split("mnist", "test").images[0].numpy().astype(np.float32) / 255.0
    with torch.no_grad():
        scores = model(torch.as_tensor(centred(digit, pad))[None, None], reconstruct=False).scores[0].numpy()
    pick = next(s for s in app.selectbox if s.label == "Capsule to decode")
    assert pick.value == int(scores.argmax())
    assert pick.format_func(pick.value) == f"{meta.class_names[pick.value]} (length {scores[pick.value]:.2f})"

    # input, reconstruction and the perturbed reconstruction are drawn; a slider changes only the last
    assert len(app.image) >= 3
    assert "-0.25" in str(dims_component(app).proto)
    before = [i.value for i in app.image]
    app.session_state[sliders_key(app)] = {"deltas": [0.0, 0.25] + [0.0] * 14}
    app.run()
    assert not app.exception, app.exception
    after = [i.value for i in app.image]
    assert after[2] != before[2] and after[1] == before[1] and app.image[2].captions == ["perturbed: d1 +0.25"]

    # a drawing or an upload of one digit is offered too: no "takes 36x36 inputs" refusal
    for source, asks in (("Draw", "Draw one digit"), ("Upload", "")):
        app.radio(key="source").set_value(source).run()
        assert not app.exception, app.exception
        assert not app.error, [e.value for e in app.error]
        assert asks in " ".join(c.value for c in app.caption)
