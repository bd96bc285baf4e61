"""What keeps a served student cheap (issue 53) computes what it would have computed: figures kept
once per process show exactly the figure a session would have drawn, keys tell every input apart,
a trace of fewer iterations is the start of a longer one, and the served process's threads."""

from __future__ import annotations

import json
import sys
import threading
import unicodedata
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest
import torch
from PIL import Image

import capsviz.checkpoint as ckpt
from capsviz import viz
from capsviz.analysis.routing import dynamic_trace, iteration_sweep, sweep_of_trace
from capsviz.devices import serving_threads
from capsviz.memo import Memo, digest

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted((ROOT / "checkpoints").glob("*.safetensors"))


# ------------------------------------------------------------------ keys and the store
def test_digest_tells_apart_what_a_figure_is_made_from():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert digest(a, "x", 1) == digest(a.copy(), "x", 1)
    others = [
        (a.reshape(3, 2), "x", 1),  # same bytes, another shape
        (a.astype(np.float64), "x", 1),  # same values, another type
        (a + np.float32(1e-6), "x", 1),
        (a, "y", 1),
        (a, "x", 1.0),  # a float is not an int
        (a, "x", True),
        ([a], "x", 1),
        ((a,), "x", 1),
        (a, ("x",), 1),
        (a, {"x": 1}, None),
    ]
    keys = {digest(*o) for o in others} | {digest(a, "x", 1)}
    assert len(keys) == len(others) + 1


def test_digest_refuses_what_has_no_value_to_key_by():
    with pytest.raises(TypeError, match="name what it stands for"):
        digest(torch.nn.Linear(2, 2))
    with pytest.raises(TypeError):
        digest([object()])


def test_memo_keeps_within_its_budget_the_least_recently_used_going_first():
    m = Memo(budget=100)
    made = []

    def make(v):
        made.append(v)
        return v

    for k in "abc":
        m.get(k, lambda k=k: make(k), lambda _: 40)  # two fit
    assert len(m) == 2 and m.size == 80 and made == ["a", "b", "c"]
    m.get("b", lambda: make("b!"), lambda _: 40)  # kept: not made again, and now the most recent
    m.get("d", lambda: make("d"), lambda _: 40)  # c goes, not b
    assert m.get("b", lambda: make("b!"), lambda _: 40) == "b" and "b!" not in made
    m.get("c", lambda: make("c2"), lambda _: 40)
    assert made[-1] == "c2"
    assert m.get("huge", lambda: "h", lambda _: 1000) == "h" and len(m) == 2  # larger than the whole store: not kept
    assert m.size <= m.budget


def test_memo_is_safe_under_threads():
    m = Memo(budget=10_000)
    errors = []

    def work(t):
        try:
            for i in range(300):
                assert m.get(i % 50, lambda i=i: i % 50, lambda _: 100) == i % 50
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and m.size <= m.budget and len(m) == 50


# ------------------------------------------------------------------ figures
def canon(fig) -> object:
    """A figure as plotly.js reads it: its JSON, typed arrays decoded, NaN as null."""
    import base64

    def norm(x):
        if isinstance(x, dict):
            if {"dtype", "bdata"} <= set(x):
                a = np.frombuffer(base64.b64decode(x["bdata"]), dtype=x["dtype"])
                if "shape" in x:
                    a = a.reshape([int(v) for v in str(x["shape"]).split(",")])
                return norm(a.tolist())
            return {k: norm(v) for k, v in x.items()}
        if isinstance(x, list):
            return [norm(v) for v in x]
        if isinstance(x, float):
            return None if x != x else round(x, 9)
        return x

    d = fig.to_dict() if isinstance(fig, go.Figure) else fig
    return norm(json.loads(pio.to_json(d, validate=False)))


HOSTILE = ["<a href='https://e'>0</a>", "**1**", "[x](https://e)", "3"]
rng = np.random.default_rng(0)
CASES = [
    (viz.lines, (rng.random((3, 4)), HOSTILE, "<b>t</b>", "x & y", "y"), {}),
    (viz.lines, (rng.random((10, 3)), ["a", "b", "c"], "t", "x", "y"), dict(log_y=True, legend_below=True, y_range=(0, 100), line=95.0)),
    (viz.lines, (rng.random((5, 2)), ["a", "b"], "t", "x", "y"), dict(x=np.linspace(0, 1, 5))),
    (viz.heatmap, (rng.random((4, 6)), "T", "xt", "yt"), {}),
    (
        viz.heatmap,
        (rng.random((4, 6)), "T <i>", "xt", "yt"),
        dict(x=[1, 2, 3, 4, 5, 6], y=HOSTILE, zmin=0, zmax=1, height=300, hover=[["h"] * 6] * 4),
    ),
    (viz.class_maps, (rng.random((4, 6, 6)), HOSTILE, "title"), {}),
    (viz.class_maps, (rng.random((3, 4, 4)), ["a", "b", "c"], "title"), dict(zrange=(0, 0.2), per_row=2)),
    (viz.capsule_bars, (rng.random(4), HOSTILE, 3, "ti"), {}),
    (viz.capsule_bars, (rng.random(4), HOSTILE, (1, 2), "ti", "len"), {}),
    (viz.effect_bars, (rng.random(16),), {}),
]


@pytest.mark.parametrize("build,args,kwargs", CASES, ids=[f"{c[0].__name__}-{k}" for k, c in enumerate(CASES)])
def test_a_figure_from_its_spec_is_the_figure_plotly_builds(build, args, kwargs):
    """The page's fast path (the spec, made plain as a dict) shows what the go.Figure path
    (plain_chart on the figure) shows, hostile names included."""
    from pages.common import plain_chart
    from pages.drawn import plain_spec

    slow = viz.Finished(plain_chart(build(*args, **kwargs)))
    fast = viz.Finished(plain_spec(build.spec(*args, **kwargs)))
    assert canon(fast.to_dict()) == canon(slow.to_dict())
    assert "<a href" not in json.dumps(canon(fast.to_dict()))


def test_streamlit_sends_a_finished_figure_as_it_sends_the_figure():
    """st.plotly_chart takes a Finished figure's dict without copying it, and the browser gets the
    same chart as from the figure itself."""
    from streamlit.testing.v1 import AppTest

    def page():
        import numpy as np
        import streamlit as st

        from capsviz import viz

        fig = viz.lines(np.arange(6.0).reshape(3, 2), ["a", "b"], "t", "x", "y")
        st.plotly_chart(fig, key="plain")
        st.plotly_chart(viz.Finished(fig), key="finished")
        st.plotly_chart(viz.Finished(viz.lines.spec(np.arange(6.0).reshape(3, 2), ["a", "b"], "t", "x", "y")), key="spec")

    at = AppTest.from_function(page).run()
    assert not at.exception
    charts = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    assert len(charts) == 3 and canon(charts[0]) == canon(charts[1]) == canon(charts[2])


def test_pictures_are_shown_as_the_png_they_were_encoded_to():
    """A kept picture is PNG no wider than asked; st.image then keeps its bytes (as JPEG or
    resized it would encode them again on every run)."""
    from streamlit.testing.v1 import AppTest

    def page():
        import numpy as np
        import streamlit as st

        from capsviz.viz import to_image
        from pages.drawn import picture, show

        png = picture(to_image, np.linspace(0, 1, 28 * 28, dtype=np.float32).reshape(28, 28), width=100)
        st.session_state["png"] = png
        show(st, png, "a caption", 100)

    at = AppTest.from_function(page).run()
    assert not at.exception
    png = at.session_state["png"]
    img = Image.open(__import__("io").BytesIO(png))
    assert img.format == "PNG" and img.width == 100 and img.mode == "L"  # grey, so stored grey
    (shown,) = [e for e in at.main if getattr(e, "type", None) == "image"]
    assert shown.proto.imgs[0].caption == "a caption"
    assert shown.proto.imgs[0].url.endswith(".png")  # sent as it was made, not encoded again as JPEG


def test_a_builder_kept_by_name_must_name_one_builder():
    from pages.drawn import _name

    with pytest.raises(ValueError, match="module-level"):
        _name(lambda: None)
    assert _name(viz.lines).startswith("capsviz.viz.lines@") and _name(viz.lines) != _name(viz.heatmap)
    # Streamlit runs every page as the module __main__: two pages' builders of one name stay two builders
    pages = []
    for file in ("pages/tour.py", "pages/playground.py"):
        scope = {"__name__": "__main__"}
        exec(compile("def em_frame(x, t):\n    return x", file, "exec"), scope)
        pages.append(scope["em_frame"])
    assert _name(pages[0]) != _name(pages[1])


def test_png_bytes_keep_a_colour_picture_in_colour():
    rgb = Image.new("RGB", (4, 4), (200, 10, 10))
    assert Image.open(__import__("io").BytesIO(viz.png_bytes(rgb))).mode == "RGB"
    grey = Image.new("RGB", (4, 4), (90, 90, 90))
    back = Image.open(__import__("io").BytesIO(viz.png_bytes(grey)))
    assert back.mode == "L" and back.getpixel((0, 0)) == 90


# ------------------------------------------------------------------ traces
@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_a_trace_of_fewer_iterations_is_the_start_of_a_longer_one(path):
    """The routing page routes an image once, 10 iterations, and shows T of them: the same
    numbers as routing it T times (every shipped model the page shows)."""
    model, meta = ckpt.load_checkpoint(path)
    if getattr(meta.config, "routing", None) != "dynamic":
        pytest.skip(f"{path.stem}: the dynamic routing page does not show it")
    rng = np.random.default_rng(1)
    shape = (meta.config.in_size,) * 2 if meta.config.in_channels == 1 else (meta.config.in_channels, *(meta.config.in_size,) * 2)
    image = (rng.random(shape) * (rng.random(shape) > 0.7)).astype(np.float32)
    full = dynamic_trace(model, image, 10)
    for T in (1, 2, 3, 7, 10):
        want, got = dynamic_trace(model, image, T), full.first(T)
        for name in ("c", "lengths", "b_change", "c_change", "agreement", "entropy", "agreements"):
            np.testing.assert_allclose(getattr(got, name), getattr(want, name), rtol=1e-5, atol=1e-6, err_msg=f"{name} at T={T}")
    with pytest.raises(ValueError):
        full.first(11)
    sweep, want = sweep_of_trace(model, full), iteration_sweep(model, image, 10)  # the page's "1 to 10 iterations" from the same run
    np.testing.assert_allclose(sweep["lengths"], want["lengths"], rtol=1e-5, atol=1e-6)
    assert sweep["predictions"] == want["predictions"]
    for got, rec in zip(sweep["reconstructions"], want["reconstructions"], strict=True):
        assert (got is None) == (rec is None) and (got is None or np.allclose(got, rec, atol=1e-5))


# ------------------------------------------------------------------ threads
@pytest.mark.parametrize(
    "env,want",
    [({}, 1), ({"CAPSVIZ_TORCH_THREADS": "2"}, 2), ({"OMP_NUM_THREADS": "2"}, None), ({"CAPSVIZ_TORCH_THREADS": "0"}, None)],
)
def test_a_served_process_runs_torch_on_one_thread_unless_told(monkeypatch, env, want):
    before = torch.get_num_threads()
    for name in ("CAPSVIZ_TORCH_THREADS", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    try:
        assert serving_threads() == (before if want is None else want)
    finally:
        torch.set_num_threads(before)


# ------------------------------------------------------------------ words kept once per process
def test_plain_text_kept_is_the_text_made_plain():
    """`plain` keeps a short text's result: the same as making it plain anew, for a printable text
    (which skips the character walk) and for any other, in every place and at any limit."""
    from capsviz.text import _plain, clean, plain

    texts = ["capsule 37", "a" * 250, "x" * 199 + "\x07", "[l](https://e) <b>", "é\u200bb\u202e", "\t\n", "", "1. x", "type 4 ：行"]
    for text in texts:
        for where in ("markdown", "code", "table", "chart"):
            for limit in (10, 300):
                assert plain(text, where, limit) == _plain(text, where, limit) == plain(text, where, limit)
    assert clean("ab\x00c\u200bd\u200de") == "abcd\u200de" and clean("a" * 301) == "a" * 299 + "…"
    # clean's shortcut: a printable text has no character the walk would drop or make a space
    every = "".join(map(chr, range(sys.maxunicode + 1)))
    shown = [ch for ch in every if ch.isprintable()]
    assert not [ch for ch in shown if unicodedata.category(ch) in ("Cc", "Cs", "Co", "Cn", "Cf") or ch in "\t\n\r\v\f\x85\u2028\u2029"]
    with pytest.raises(ValueError):
        plain("x", "somewhere")


def test_capsule_names_are_made_once_per_language_and_handed_out_as_copies():
    from types import SimpleNamespace

    from capsviz import i18n
    from capsviz.analysis.routing.maps import capsule_labels

    tr = SimpleNamespace(c=np.zeros((1, 2 * 3 * 3, 10)), layout=SimpleNamespace(grouping="paper", grid=3, types=2))
    first = capsule_labels(tr)
    first["hover"][0][0] = "changed by a caller"
    again = capsule_labels(tr)
    assert again["hover"][0][0] == "type 1 at row 1, col 1" and again["hover"][1][5] == "type 2 at row 2, col 3"
    before = i18n.language()
    try:
        i18n.set_language("zh-Hans")
        assert capsule_labels(tr)["hover"][1][5] != again["hover"][1][5]
    finally:
        i18n.set_language(before)
    assert capsule_labels(tr) == again


def test_catalogs_are_read_ahead_only_in_a_served_process():
    """pages.language reads every language's catalog in the background when a server starts; a
    test (no runtime, or AppTest's stand-in) reads only what it uses."""
    from unittest import mock

    from streamlit.runtime import Runtime

    from pages.language import preload_catalogs

    assert preload_catalogs() is None  # no runtime here
    with mock.patch.object(Runtime, "_instance", mock.MagicMock(spec=Runtime)):
        assert preload_catalogs() is None  # AppTest's stand-in
    served = object.__new__(Runtime)
    with mock.patch.object(Runtime, "_instance", served), mock.patch("pages.language._load_catalogs") as load:
        preload_catalogs().join(5)
    load.assert_called_once()
