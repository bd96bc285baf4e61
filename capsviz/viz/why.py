"""Figures of the "Why capsules" chapter (capsviz.analysis.why): numbers in, plotly specs or PIL
images out. Every number a sentence of the chapter quotes is a point of one of these charts.

Text is large (`FONT`, `BIG` for a projector): a chapter a teacher shows to a room is read from
its back rows."""

from __future__ import annotations

import numpy as np

from capsviz.analysis.why import KIND_NAMES, SCHEME_SHORT, SCHEMES
from capsviz.i18n import t
from capsviz.viz import figure_builder

FONT = 15  # the charts' text on a laptop or phone (plotly's default is 12)
BIG = 22  # on a projector: at least 20 px at 1920x1080, read from the back of a room
CNN = "#1f77b4"
CAPS = "#d62728"
THIRD = "#2ca02c"


def _layout(title: str, x_title: str, y_title: str, big: bool, height: int = 340) -> dict:
    size = BIG if big else FONT
    # every text's size named: Streamlit's chart theme sets its own, smaller, where a figure leaves one unset
    text = {"size": size}
    return {
        "title": {"text": title, "font": {"size": size + 2}},
        "font": text,
        "xaxis": {"title": {"text": x_title, "font": text}, "tickfont": text},
        "yaxis": {"title": {"text": y_title, "font": text}, "tickfont": text},
        # the legend under the chart: long names keep a phone's narrow chart its width and never cover a line
        "legend": {"orientation": "h", "yanchor": "top", "y": -0.28, "x": 0, "font": text},
        "height": height + (120 if big else 80),
        "margin": {"l": 10, "r": 10, "t": 50 if big else 40, "b": 10},
    }


def _line(x, y, name: str, colour: str, dash: str | None = None) -> dict:
    return {
        "type": "scatter",
        "x": list(x),
        "y": [float(v) for v in y],
        "name": name,
        "mode": "lines+markers",
        "line": {"color": colour, "width": 3, **({"dash": dash} if dash else {})},
        # the CNN's squares larger than the capsules' dots: where both lines lie on each other, both still show
        "marker": {"size": 13 if colour == CNN else 9, "symbol": "square" if colour == CNN else "circle"},
    }


def _x_title(kind: str) -> str:
    return t(KIND_NAMES[kind])


def _marked(layout: dict, kind: str, amount: float) -> dict:
    """A dotted vertical line at the chosen change; ticks at the values measured (no 0.5 px)."""
    layout["xaxis"]["dtick"] = 1 if kind == "shift" else 10
    layout["shapes"] = [
        {"type": "line", "x0": amount, "x1": amount, "yref": "y domain", "y0": 0, "y1": 1, "line": {"color": "grey", "dash": "dot"}}
    ]
    return layout


@figure_builder
def changes(sweep: dict, kind: str, amount: float, big: bool = False) -> dict:
    """How much each representation changes, as a share of its own size (%), over the values of
    `kind`: the CNN's pooled features and class scores, the winning capsule's vector."""
    x = sweep[f"{kind}_values"]
    data = [
        _line(x, sweep[f"{kind}_cnn_features"], t("CNN: pooled features"), CNN),
        _line(x, sweep[f"{kind}_cnn_scores"], t("CNN: class scores"), CNN, "dash"),
        _line(x, sweep[f"{kind}_caps_vector"], t("Winning capsule: its vector"), CAPS),
    ]
    return {"data": data, "layout": _marked(_layout(t("What changes"), _x_title(kind), t("change, % of its own size"), big), kind, amount)}


@figure_builder
def stays(sweep: dict, kind: str, amount: float, big: bool = False) -> dict:
    """What stays (% of the test images): each model's answer kept, and the reconstruction
    following the digit (where the digit moved: not at 0)."""
    x = sweep[f"{kind}_values"]
    moved = [k for k, v in enumerate(x) if v != 0]
    data = [
        _line(x, sweep[f"{kind}_cnn_kept"], t("CNN keeps its answer"), CNN),
        _line(x, sweep[f"{kind}_caps_kept"], t("Capsules keep their answer"), CAPS),
        _line(
            [x[k] for k in moved],
            [sweep[f"{kind}_follows"][k] for k in moved],
            t("Reconstruction follows the digit"),
            THIRD,
            "dash",
        ),
    ]
    layout = _layout(t("What stays"), _x_title(kind), t("% of test images"), big)
    layout["yaxis"]["range"] = [0, 105]
    return {"data": data, "layout": _marked(layout, kind, amount)}


@figure_builder
def capsule(sweep: dict, kind: str, amount: float, big: bool = False) -> dict:
    """The winning capsule over the values of `kind`: its mean length, the angle it turns through
    (degrees) and how many of its dimensions move (rules.dimension_moves)."""
    x = sweep[f"{kind}_values"]
    data = [
        _line(x, sweep[f"{kind}_caps_angle"], t("Angle turned (degrees)"), CAPS),
        _line(x, sweep[f"{kind}_caps_dims"], t("Dimensions that move"), THIRD, "dash"),
        {**_line(x, sweep[f"{kind}_caps_length"], t("Length (right axis)"), "#555555", "dot"), "yaxis": "y2"},
    ]
    layout = _layout(t("The winning capsule"), _x_title(kind), t("degrees, or dimensions"), big)
    layout["yaxis2"] = {
        "title": {"text": t("length"), "font": layout["font"]},
        "tickfont": layout["font"],
        "overlaying": "y",
        "side": "right",
        "range": [0, 1.05],
        "tickmode": "linear",  # its own round ticks, not the left axis' grid carried over
        "dtick": 0.25,
        "showgrid": False,
    }
    return {"data": data, "layout": _marked(layout, kind, amount)}


@figure_builder
def this_digit(view: dict, kind: str, amount: float, big: bool = False) -> dict:
    """One digit over the values of `kind`: the winning capsule's length and the CNN's score for
    its own answer (left axis, 0 to 1); the capsule's angle turned (degrees) and the CNN's pooled
    features' change (% of their size) on the right axis."""
    x = view["values"]
    data = [
        _line(x, view["lengths"], t("Capsule's length"), CAPS),
        _line(x, view["cnn_score"], t("CNN's score"), CNN),
        {**_line(x, view["angles"], t("Capsule's angle turned (degrees, right axis)"), CAPS, "dot"), "yaxis": "y2"},
        {**_line(x, view["cnn_features"], t("CNN's pooled features' change (%, right axis)"), CNN, "dot"), "yaxis": "y2"},
    ]
    layout = _layout(t("This digit"), _x_title(kind), t("length or score"), big)
    layout["yaxis"]["range"] = [0, 1.05]
    layout["yaxis2"] = {
        "title": {"text": t("degrees, or %"), "font": layout["font"]},
        "tickfont": layout["font"],
        "overlaying": "y",
        "side": "right",
        "rangemode": "tozero",
        "tickmode": "auto",  # its own round ticks, not the left axis' grid carried over
        "showgrid": False,
    }
    return {"data": data, "layout": _marked(layout, kind, amount)}


@figure_builder
def dimensions(view: dict, amount: float, big: bool = False) -> dict:
    """The winning capsule's 16 numbers on the unchanged digit and at the chosen change."""
    k, zero = view["values"].index(float(amount)), view["values"].index(0.0)
    dims = [f"d{i}" for i in range(view["vectors"].shape[1])]
    data = [
        {"type": "bar", "x": dims, "y": [float(v) for v in view["vectors"][zero]], "name": t("unchanged"), "marker": {"color": "#999999"}},
        {"type": "bar", "x": dims, "y": [float(v) for v in view["vectors"][k]], "name": t("changed"), "marker": {"color": CAPS}},
    ]
    layout = _layout(t("The capsule's 16 numbers"), t("dimension"), t("value"), big, height=300)
    layout["barmode"] = "group"
    layout["xaxis"]["type"] = "category"
    return {"data": data, "layout": layout}


# --- parts in the wrong places


@figure_builder
def parts_right(sweep: dict, big: bool = False) -> dict:
    """Who still names the true class (% of the images both get right unchanged), per scheme."""
    groups = [t("original")] + [t(SCHEME_SHORT[s]) for s in SCHEMES]
    data = [
        {"type": "bar", "x": groups, "y": sweep["cnn_right"], "name": t("CNN"), "marker": {"color": CNN}},
        {"type": "bar", "x": groups, "y": sweep["caps_right"], "name": t("Capsule network"), "marker": {"color": CAPS}},
    ]
    layout = _layout(t("Still names the true class"), "", t("% of test images"), big)
    layout |= {"barmode": "group"}
    layout["yaxis"]["range"] = [0, 105]
    return {"data": data, "layout": layout}


@figure_builder
def parts_scores(sweep: dict, big: bool = False) -> dict:
    """The true class's mean CNN score, capsule length and votes' agreement, per scheme."""
    groups = [t("original")] + [t(SCHEME_SHORT[s]) for s in SCHEMES]
    data = [
        {"type": "bar", "x": groups, "y": sweep["cnn_score"], "name": t("CNN's score"), "marker": {"color": CNN}},
        {"type": "bar", "x": groups, "y": sweep["caps_length"], "name": t("Capsule's length"), "marker": {"color": CAPS}},
        {"type": "bar", "x": groups, "y": sweep["agreement"], "name": t("Votes' agreement"), "marker": {"color": THIRD}},
    ]
    layout = _layout(t("For the true class"), "", t("mean"), big)
    layout |= {"barmode": "group"}
    layout["yaxis"]["range"] = [0, 1.05]
    return {"data": data, "layout": layout}


# --- matrix capsules


@figure_builder
def votes_move(sweep: dict, kind: str, amount: float, big: bool = False) -> dict:
    """The winning class's votes over the values of `kind`: their mean's move, and their spread
    after the change against the spread they had."""
    x = sweep[f"{kind}_values"]
    data = [
        _line(x, sweep[f"{kind}_mean_move"], t("How far their mean moves"), CAPS),
        _line(x, sweep[f"{kind}_spread_after"], t("Their spread after the change"), THIRD),
        _line(x, sweep[f"{kind}_spread_before"], t("Their spread before"), "#777777", "dot"),
    ]
    return {
        "data": data,
        "layout": _marked(_layout(t("The winning class's votes"), _x_title(kind), t("distance in pose space"), big), kind, amount),
    }


@figure_builder
def coordinates(sweep: dict, kind: str, amount: float, big: bool = False) -> dict:
    """With and without coordinate addition on the same weights: how far the mean pose's two
    position entries move over the values of `kind`."""
    x = sweep[f"{kind}_values"]
    data = [
        _line(x, sweep[f"{kind}_position_move"], t("With coordinate addition"), CAPS),
        _line(x, sweep[f"{kind}_position_move_plain"], t("Without, same weights"), CNN, "dash"),
    ]
    layout = _layout(t("How far the position moves"), _x_title(kind), t("mean pose's position entries"), big)
    return {"data": data, "layout": _marked(layout, kind, amount)}


@figure_builder
def coordinates_kept(sweep: dict, kind: str, amount: float, big: bool = False) -> dict:
    """At the chosen change: the answer kept with and without coordinate addition, and how often
    the two give the same answer on the unchanged images (%)."""
    k = sweep[f"{kind}_values"].index(float(amount))
    groups = [t("answer kept, with"), t("answer kept, without"), t("same answer unchanged")]
    values = [sweep[f"{kind}_kept"][k], sweep[f"{kind}_kept_plain"][k], sweep["same_answer"]]
    data = [{"type": "bar", "x": groups, "y": values, "marker": {"color": [CAPS, CNN, "#777777"]}, "showlegend": False}]
    layout = _layout(t("Answers kept"), "", t("% of test images"), big)
    layout["yaxis"]["range"] = [0, 105]
    return {"data": data, "layout": layout}


@figure_builder
def vote_cloud(view: dict, which: str, big: bool = False) -> dict:
    """One digit's votes for the winning class, their two position entries, before and after the
    change (`which`: "with" or "without" coordinate addition); each dot sized by its weight."""
    v = view[which]

    def dots(points, weights, name, colour):
        w = np.asarray(weights, float)
        size = 6 + 24 * np.sqrt(w / max(w.max(), 1e-12))
        return {
            "type": "scatter",
            "x": [float(p) for p in points[:, 0]],
            "y": [float(p) for p in points[:, 1]],
            "mode": "markers",
            "name": name,
            "marker": {"color": colour, "size": [float(s) for s in size], "opacity": 0.6},
        }

    data = [dots(v["before"], v["w_before"], t("before"), "#777777"), dots(v["after"], v["w_after"], t("after"), CAPS)]
    title = t("Votes, with coordinates") if which == "with" else t("Votes, without (same weights)")
    layout = _layout(title, t("vote entry (0, 3): row"), t("vote entry (1, 3): column"), big, height=340)
    return {"data": data, "layout": layout}
