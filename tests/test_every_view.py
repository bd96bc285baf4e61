"""Every page with every model, each control at both ends of its range: nothing may raise.

The tests' tiny models run on synthetic data everywhere; the shipped checkpoints run on the real
test sets where ../shared/data is present (CI has it). A page that does not fit a model says so
and offers others; that is a pass, as long as it does not raise."""

from pathlib import Path

import pytest
import torch
from streamlit.testing.v1 import AppTest
from test_app import APP, app, router_mode  # noqa: F401 - the fixtures: tiny models, router mode

from capsviz import checkpoint as ckpt
from capsviz.analysis.links import linked
from capsviz.config import preset
from capsviz.models import build_model

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(p.stem for p in (ROOT / "pages").glob("*.py") if p.stem != "common")


def one_per_architecture(folder: Path) -> list[str]:
    """One shipped model per preset and dataset: models that differ only in the couplings or
    iterations they were trained with show the same views (the tiny uniform model covers the
    page's words for those)."""
    first: dict[str, str] = {}
    for p in sorted(folder.glob("*.safetensors"), key=lambda p: (len(p.stem), p.stem)):
        meta = ckpt.read_meta(p)
        first.setdefault(f"{(meta.run or {}).get('model', meta.config.family)} on {meta.image_dataset}", p.name)
    return sorted(first.values())


SHIPPED = one_per_architecture(ROOT / "checkpoints")
TINY = ["tiny-capsnet.safetensors", "tiny-matrix.safetensors", "tiny-cnn.safetensors", "tiny-multimnist.safetensors"]
KINDS = ["slider", "select_slider", "number_input", "selectbox", "radio", "toggle", "checkbox"]
# The sidebar's pickers change the model itself (every model gets its own run here), and the
# Train page's form fields only start a run when submitted (tests/test_train_page.py).
SKIP = {"model_pick", "dataset_pick", "class_mode"}  # class_mode: the whole server's setting (tests/test_class_people.py)
MODEL_FREE = {"zoo", "playground", "reproduction", "train", "glossary"}  # these show every model at once: the test models cover them


def _value_for(widget, shown: str):
    """The option value behind a shown (formatted) option: AppTest sets option widgets by value."""
    candidates = [shown, shown.lower(), *range(-1, len(widget.options) + 2)]
    table = getattr(widget.format_func, "__self__", None)  # format_func=SOME_DICT.get: the dict's keys
    if isinstance(table, dict):
        candidates += list(table)
    for cast in (int, float):
        try:
            candidates.append(cast(shown))
        except ValueError:
            pass
    for v in candidates:
        try:
            if str(widget.format_func(v)) == shown:
                return v
        except Exception:  # noqa: BLE001 - a format_func that does not take this candidate
            continue
    return shown


def end_value(widget, end: int):
    """The widget's value at one end (0: low, 1: high): min or max, first or last option, off or on."""
    if widget.type in ("slider", "number_input"):
        v = widget.max if end else widget.min
        return (v, v) if isinstance(widget.value, tuple) else v
    if widget.type in ("selectbox", "radio", "select_slider"):
        return _value_for(widget, widget.options[-1 if end else 0])
    return bool(end)


def set_to(at: AppTest, kind: str, key: str, end: int):
    """Set the widget called `key` to one end; None where this run no longer shows it (or it has no options)."""
    try:
        widget = getattr(at, kind)(key=key)
    except KeyError:
        return None
    if widget.type in ("selectbox", "radio", "select_slider") and not widget.options:
        return None
    value = end_value(widget, end)
    widget.set_value(value)
    return value


def open_page(page: str, model: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["model"] = model
    at.switch_page(f"pages/{page}.py").run()
    return at


def fits(at: AppTest) -> bool:
    """False where the page said the active model does not fit it and offered others."""
    return not any(b.key and b.key.startswith("switch_") for b in at.button)


def sweep(page: str, model: str) -> int:
    """Open `page` with `model`, then move every control to each end; returns how many settings ran."""
    at = open_page(page, model)
    assert not at.exception, f"{page} with {model}: {at.exception[0].message}"
    assert at.session_state["model_pick"] == model
    if not fits(at):
        return 0
    settings, seen = 0, set()
    for kind in KINDS:
        for widget in list(getattr(at, kind)):
            key = widget.key
            if key is None or key.startswith("$$") or key in SKIP or (kind, key) in seen:
                continue
            seen.add((kind, key))
            for end in (0, 1):
                value = set_to(at, kind, key, end)
                if value is None:
                    break
                at.run()
                settings += 1
                assert not at.exception, f"{page} with {model}, {key} = {value!r}: {at.exception[0].message}"
    return settings


@pytest.mark.usefixtures("app")
@pytest.mark.parametrize("page", PAGES)
def test_every_page_with_every_test_model_at_each_control_end(page):
    ran = sum(sweep(page, model) for model in TINY)
    assert ran > 0 or page in ("reproduction", "glossary"), f"{page}: no control was moved"


@pytest.mark.parametrize("page", PAGES)
def test_every_page_with_the_newer_capsule_models_at_each_control_end(app, page):  # noqa: F811
    """Models anyone can now train from the Train page: Efficient-CapsNet (self-attention routing)
    and a CapsNet trained with uniform couplings."""
    torch.manual_seed(0)
    about = {"dataset": "mnist", "epochs": 1, "metrics": {"test_error": 30.0, "n_test": 100, "how": "fixture"}}
    ckpt.save_checkpoint(app.folder / "tiny-efficient.safetensors", build_model(preset("efficient-capsnet")), about)
    uniform = preset("capsnet-small", conv1_channels=16, primary_types=4, couplings="uniform")
    ckpt.save_checkpoint(app.folder / "tiny-uniform.safetensors", build_model(uniform), about)
    for model in ("tiny-efficient.safetensors", "tiny-uniform.safetensors"):
        sweep(page, model)


@pytest.mark.parametrize("model", SHIPPED)
def test_every_page_with_a_shipped_model_at_each_control_end(real_data, monkeypatch, tmp_path, model):
    monkeypatch.delenv("CAPSVIZ_CHECKPOINTS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    for page in PAGES:
        if page in MODEL_FREE:
            continue
        sweep(page, model)


LINKS = {  # page -> (model, the link's controls, what each widget must then show)
    "routing": ("tiny-capsnet", {"iterations": "4", "t": "2", "capsule": "7"}, {("slider", "iterations"): 4, ("slider", "t"): 2}),
    "em": (
        "tiny-matrix",
        {"iterations": "2", "t": "1", "zoom": "true", "layer": "convcaps2", "position": "0"},
        {("slider", "iterations"): 2, ("slider", "t"): 1, ("toggle", "zoom"): True, ("selectbox", "layer"): "convcaps2"},
    ),
    "robustness": (
        "tiny-capsnet",
        {"rotate": "45", "scale": "1.2", "attack": "BIM", "targeted": "true", "epsilon": "0.2", "tab": "Adversarial attacks"},
        {("slider", "rotate"): 45, ("slider", "scale"): 1.2, ("radio", "attack"): "bim", ("toggle", "targeted"): True},
    ),
    "zoo": ("tiny-capsnet", {"squash": "3.0"}, {("slider", "squash"): 3.0}),
}


@pytest.mark.usefixtures("app")
@pytest.mark.parametrize("page", sorted(LINKS))
def test_a_link_restores_every_control(page):
    model, params, expected = LINKS[page]
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"model": f"{model}.safetensors", "image": "3", **params})
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, at.exception
    for (kind, key), value in expected.items():
        assert (
            getattr(at, kind)(key=key).value == pytest.approx(value)
            if isinstance(value, float)
            else getattr(at, kind)(key=key).value == value
        )
    if page != "zoo":
        assert at.number_input(key="image").value == 3


ODD = ["abc", "1e3", "3.5", "", "-1", "99999999999999999999", "nan", "inf", "1e308"]


@pytest.mark.usefixtures("app")
@pytest.mark.parametrize("page", ["explorer", "routing", "em", "robustness"])
@pytest.mark.parametrize("odd", ODD)
def test_odd_link_values_are_brought_into_range_and_said(page, odd):
    at = AppTest.from_file(APP, default_timeout=60)
    model = "tiny-matrix" if page == "em" else "tiny-capsnet"
    keys = ["image", "capsule", "dims", "iterations", "t", "position", "rotate", "epsilon", "tab", "layer", "zoom"]
    at.query_params.update({"model": f"{model}.safetensors", **dict.fromkeys(keys, odd)})
    at.switch_page(f"pages/{page}.py").run()
    assert not at.exception, f"{page} with every value {odd!r}: {at.exception[0].message}"
    image = at.number_input(key="image")
    assert image.value == linked(odd, 0, int(image.max), 0, "test image").value  # the nearest index there is (capsviz.analysis.links)
    assert any(i.value.replace("\\", "").startswith("The link asks for test image") for i in at.info)
