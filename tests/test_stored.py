"""Stored sweep results: keyed by the model file and the settings, checked before use, shipped for
the shipped models at the pages' defaults, and the same numbers a new run gives."""

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from test_app import APP, router_mode  # noqa: F401 - the fixture: app.py's st.navigation in charge

from capsviz.analysis import stored
from capsviz.analysis.robustness import attack_sweep, attack_test_images
from capsviz.checkpoint import list_checkpoints, load_checkpoint

ROOT = Path(__file__).resolve().parents[1]


def test_a_key_follows_the_file_and_the_settings(tmp_path):
    f = tmp_path / "m.safetensors"
    f.write_bytes(b"weights one")
    settings = stored.attack_settings("mnist", "fgsm", False, 100, stored.ATTACK_EPSILONS)
    k = stored.sweep_key(f, "attack", settings)
    assert k == stored.sweep_key(f, "attack", dict(settings))
    assert k != stored.sweep_key(f, "attack", stored.attack_settings("mnist", "bim", False, 100, stored.ATTACK_EPSILONS))
    assert k != stored.sweep_key(f, "affine", settings)
    f.write_bytes(b"weights two, retrained")  # a retrained model never meets the old result
    assert k != stored.sweep_key(f, "attack", settings)


def test_a_result_is_computed_once_then_read(tmp_path):
    calls = []

    def compute():
        calls.append(1)
        return {"accuracy": [99.0, 50.5], "zero_gradients": 0.0}

    first, was_stored = stored.remembered("attack-k", compute, [tmp_path], tmp_path)
    again, was_stored_again = stored.remembered("attack-k", compute, [tmp_path], tmp_path)
    assert (was_stored, was_stored_again) == (False, True)
    assert first == again and len(calls) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["attack-k.json"]  # no partial file left


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        "[]",
        "{}",
        '{"accuracy": [1, "2"]}',
        '{"accuracy": [1, NaN]}',
        '{"accuracy": [1, Infinity]}',
        '{"accuracy": [true]}',
        '{"accuracy": {"nested": 1}}',
        '{"accuracy": [' + ",".join(["1"] * (stored.MAX_VALUES + 1)) + "]}",
    ],
)
def test_a_damaged_or_odd_file_is_ignored(tmp_path, text):
    (tmp_path / "attack-k.json").write_text(text)
    assert stored.read("attack-k", [tmp_path]) is None
    value, was_stored = stored.remembered("attack-k", lambda: {"accuracy": [1.0]}, [tmp_path], tmp_path)
    assert (value, was_stored) == ({"accuracy": [1.0]}, False)  # and the good result replaces it
    assert json.loads((tmp_path / "attack-k.json").read_text()) == {"accuracy": [1.0]}


def test_an_oversized_file_is_not_read(tmp_path):
    (tmp_path / "attack-k.json").write_text('{"accuracy": [1]}' + " " * stored.MAX_BYTES)
    assert stored.read("attack-k", [tmp_path]) is None


def test_a_folder_that_cannot_be_written_only_costs_speed(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    stored.write("attack-k", {"accuracy": [1.0]}, blocker / "sub")  # a file where the folder should be: no raise
    with pytest.raises(ValueError):
        stored.write("attack-k", {"accuracy": [float("nan")]}, tmp_path)


def _shipped_28():
    for path, meta in list_checkpoints(ROOT / "checkpoints"):
        if meta.config.in_size == 28 and meta.image_dataset in ("mnist", "fashion-mnist"):
            yield path, meta


@pytest.mark.parametrize("path", [p for p, _ in _shipped_28()], ids=lambda p: p.stem)
def test_every_shipped_model_has_its_default_sweeps(path):
    meta = dict(_shipped_28())[path]
    dataset = meta.image_dataset
    folders = [stored.shipped_folder()]
    for method in ("fgsm", "bim"):
        for targeted in (False, True):
            settings = stored.attack_settings(dataset, method, targeted, stored.ATTACK_IMAGES, stored.ATTACK_EPSILONS)
            value = stored.read(stored.sweep_key(path, "attack", settings), folders)
            assert value is not None, f"{path.name}: run `python -m capsviz.analysis.stored` after changing a shipped model"
            assert len(value["accuracy"]) == len(stored.ATTACK_EPSILONS)
            assert len(value["success"]) == (len(stored.ATTACK_EPSILONS) if targeted else 0)
    settings = stored.affine_settings(dataset, 28, stored.AFFINE_IMAGES, stored.AFFINE_STRENGTHS)
    assert len(stored.read(stored.sweep_key(path, "affine", settings), folders)["accuracy"]) == len(stored.AFFINE_STRENGTHS)


def test_a_shipped_result_is_what_a_new_run_gives(real_data):
    from capsviz.data import load_split

    path = ROOT / "checkpoints" / "cnn-small-mnist.safetensors"
    model, _ = load_checkpoint(path)
    x, y = attack_test_images(load_split("mnist", "test", real_data), stored.ATTACK_IMAGES, 28)
    settings = stored.attack_settings("mnist", "fgsm", False, stored.ATTACK_IMAGES, stored.ATTACK_EPSILONS)
    kept = stored.read(stored.sweep_key(path, "attack", settings), [stored.shipped_folder()])
    fresh = attack_sweep(model, x, y, stored.ATTACK_EPSILONS, method="fgsm").as_dict()
    assert kept["epsilons"] == fresh["epsilons"]
    # whole images: 1% of 100; another CPU's rounding may flip an image or two near a boundary
    assert max(abs(a - b) for a, b in zip(kept["accuracy"], fresh["accuracy"], strict=True)) <= 2.0


def test_the_robustness_page_shows_the_shipped_sweeps_without_running_them(real_data, monkeypatch, tmp_path):
    monkeypatch.delenv("CAPSVIZ_CHECKPOINTS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # nothing computed on this machine
    monkeypatch.delenv("CAPSVIZ_CACHE", raising=False)
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["model"] = "capsnet-mnist.safetensors"
    at.query_params["attack"] = "BIM"
    at.query_params["tab"] = "Adversarial attacks"
    at.switch_page("pages/robustness.py").run()
    assert not at.exception
    captions = " ".join(c.value for c in at.caption)
    assert "A stored result" in captions
    assert [b.label for b in at.button if b.label == "Run the attack sweep"] == []
    (curve,) = [c.proto.spec for c in at.get("plotly_chart") if c.proto.id.endswith("-adv_curve")]
    assert "BIM accuracy" in curve
    assert [d["name"] for d in json.loads(curve)["data"]] == ["capsnet-mnist", "cnn-small-mnist", "matrix-small-mnist"]
    assert not list(tmp_path.rglob("*.json"))  # read, not recomputed
