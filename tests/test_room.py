"""capsviz.viz.room: in projector mode every chart's text is at least ROOM px, whatever page drew it,
and the chart kept for a laptop is never changed by it. tests/e2e/test_projector_pages_browser.py
measures the text as chromium draws it on every page."""

import copy
import json

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots
from plotly.utils import PlotlyJSONEncoder

from capsviz.viz import capsule_bars, class_maps, curves, heatmap, lines, seed_strip, sweep_lines
from capsviz.viz.room import GROW, ROOM, for_room


def as_json(spec) -> str:
    return json.dumps(spec, cls=PlotlyJSONEncoder, sort_keys=True)


def sizes(spec) -> list[tuple[str, float]]:
    """(where, size) of every font size named anywhere in `spec`."""
    found = []

    def walk(x, where):
        if isinstance(x, dict):
            for k, v in x.items():
                if k.endswith("font") and isinstance(v, dict) and "size" in v:
                    for s in np.ravel(v["size"]):
                        found.append((f"{where}.{k}", float(s)))
                walk(v, f"{where}.{k}")
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, f"{where}[{i}]")

    walk(spec, "")
    return found


def figures() -> list[dict]:
    rng = np.random.default_rng(0)
    names = [str(d) for d in range(10)]
    both = make_subplots(rows=1, cols=2, subplot_titles=("left", "right"))
    both.add_trace(go.Heatmap(z=rng.random((4, 4)), colorbar={"title": {"text": "c"}}), row=1, col=1)
    both.add_trace(go.Bar(x=names[:3], y=[1, 2, 3], text=["a", "b", "c"]), row=1, col=2)
    both.update_layout(height=300, margin={"l": 20, "r": 10, "t": 40, "b": 10}, annotations=[*both.layout.annotations, {"text": "note"}])
    return [
        capsule_bars.spec(rng.random(10), names, 3, "scores", "length"),
        class_maps.spec(rng.random((10, 6, 6)), names, "maps"),
        heatmap.spec(rng.random((5, 7)), "couplings", "class", "capsule"),
        lines.spec(rng.random((3, 2)), ["a", "b"], "t", "x", "y", line=0.5, legend_below=True),
        curves([{"step": 1, "loss": 1.0}, {"step": 2, "loss": 0.5}], "loss", "Training loss").to_dict(),
        sweep_lines([0, 1, 2], {"CNN": [1.0, 0.9, 0.5]}, "sweep", "px", "acc", chance=0.1).to_dict(),
        seed_strip({"dynamic": [1.0, 1.2]}, (0, 1), "seeds").to_dict(),
        both.to_dict(),
    ]


def test_every_text_of_every_chart_is_room_sized_and_the_laptop_chart_is_kept():
    for spec in figures():
        kept = copy.deepcopy(spec)
        room = for_room(spec)
        assert as_json(spec) == as_json(kept)  # the laptop's chart, shared by every session, is never changed
        small = [(where, s) for where, s in sizes(room) if s < ROOM]
        assert not small, small
        layout = room["layout"]
        for name in [n for n in layout if n.startswith(("xaxis", "yaxis"))]:
            assert layout[name]["tickfont"]["size"] >= ROOM, name  # named: Streamlit's theme would set a smaller one
        assert layout["legend"]["font"]["size"] >= ROOM and layout["hoverlabel"]["font"]["size"] >= ROOM
        if isinstance(kept["layout"].get("height"), int):
            assert layout["height"] == round(kept["layout"]["height"] * GROW)
        assert [t.get("type") for t in room["data"]] == [t.get("type") for t in spec["data"]]  # the same traces


def test_larger_text_is_kept_and_subplot_notes_colour_bars_and_bar_text_grow():
    spec = figures()[-1]
    spec["layout"]["title"] = {"text": "big", "font": {"size": 40}}
    room = for_room(spec)
    assert room["layout"]["title"]["font"]["size"] == 40  # never made smaller
    assert all(n["font"]["size"] >= ROOM for n in room["layout"]["annotations"])
    heat, bar = room["data"]
    assert heat["colorbar"]["tickfont"]["size"] >= ROOM and heat["colorbar"]["title"]["font"]["size"] >= ROOM
    assert bar["textfont"]["size"] >= ROOM
    assert room["layout"]["margin"]["l"] == round(20 * GROW)
    log = for_room({"data": [], "layout": {"yaxis": {"type": "log"}}})
    assert log["layout"]["yaxis"]["dtick"] == 1  # no small digits between the powers of ten
    per_point = for_room({"data": [{"type": "scatter", "text": ["a", "b"], "textfont": {"size": [8, 30]}}], "layout": {}})
    assert per_point["data"][0]["textfont"]["size"] == [ROOM, 30]
