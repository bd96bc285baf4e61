"""Figure builders: numpy in, plotly figure or PIL image out. No Streamlit here."""

from __future__ import annotations

import base64
import functools
import io

import numpy as np
import plotly.graph_objects as go
from PIL import Image

from capsviz.i18n import t

VIRIDIS = [
    [0.0, "#440154"],
    [1 / 9, "#482878"],
    [2 / 9, "#3e4989"],
    [3 / 9, "#31688e"],
    [4 / 9, "#26828e"],
    [5 / 9, "#1f9e89"],
    [6 / 9, "#35b779"],
    [7 / 9, "#6ece58"],
    [8 / 9, "#b5de2b"],
    [1.0, "#fde725"],
]  # plotly's "Viridis", as a go.Figure spells it out
MARGIN = {"l": 10, "r": 10, "t": 40, "b": 10}  # the charts' usual margins: room for the title, little else


def figure_builder(spec):
    """A figure builder written as its spec: the plain dict plotly.js draws. Calling the builder
    gives a go.Figure; `builder.spec` gives the dict alone, for a page that only shows the figure
    (plotly checks and copies every value into a go.Figure: ten times the time of the dict)."""

    @functools.wraps(spec)
    def build(*args, **kwargs) -> go.Figure:
        return go.Figure(spec(*args, **kwargs))

    build.spec = spec
    return build


def pixels(a: np.ndarray) -> np.ndarray:
    """An image in capsviz's layout, (H, W) grey or (C, H, W) colour (capsviz.analysis), as the
    pixels PIL takes: uint8 (H, W) or (H, W, 3)."""
    a = np.clip(np.asarray(a, np.float32), 0, 1)
    if a.ndim == 3:
        a = a[0] if a.shape[0] == 1 else a.transpose(1, 2, 0)  # (H, W, C)
    return (a * 255).astype(np.uint8)


def to_image(a: np.ndarray, scale: int = 6) -> Image.Image:
    """(H, W) or (C, H, W) in [0, 1] -> an upscaled grey or RGB PIL image (nearest: pixels stay visible)."""
    p = pixels(a)
    img = Image.fromarray(p, "RGB" if p.ndim == 3 else "L")
    return img.resize((p.shape[1] * scale, p.shape[0] * scale), Image.NEAREST)


def grey(a: np.ndarray) -> np.ndarray:
    """(H, W) or (C, H, W) -> (H, W) brightness (the mean of the channels): what overlays tint."""
    a = np.asarray(a, np.float32)
    return a.mean(axis=0) if a.ndim == 3 else a


def png_bytes(img: Image.Image) -> bytes:
    """`img` as PNG, fast: compression level 1 (a third of the default's time, files about a tenth
    larger), and a colour picture that is all grey stored as grey (a third of the bytes to encode)."""
    if img.mode == "RGB":
        a = np.asarray(img)
        if (a[..., 0] == a[..., 1]).all() and (a[..., 1] == a[..., 2]).all():
            img = img.convert("L")
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def thumbnail(a: np.ndarray) -> str:
    """(H, W) or (C, H, W) in [0, 1] as a small PNG in base64 text (twice its size up to 64 pixels
    wide, as it is beyond), as the class's store keeps a question's image."""
    width = np.asarray(a).shape[-1]
    return base64.b64encode(png_bytes(to_image(a, 2 if width <= 64 else 1))).decode("ascii")


class Finished(go.Figure):
    """A figure made once and shown many times: its dict (a go.Figure's, or a spec from a
    `figure_builder`, given plotly's default template as a go.Figure would be) is handed out as it
    is: Streamlit's st.plotly_chart asks a figure for `to_dict()`, which deep-copies everything in a
    plain figure on every call. Never change one: build a new figure instead."""

    def __init__(self, fig: go.Figure | dict):
        super().__init__()
        if isinstance(fig, go.Figure):
            self._spec = fig.to_dict()
        else:
            self._spec = {"data": fig["data"], "layout": {**fig.get("layout", {})}}
            self._spec["layout"].setdefault("template", _default_template())

    def to_dict(self) -> dict:
        return self._spec


@functools.cache
def _default_template() -> dict:
    import plotly.io as pio

    return pio.templates[pio.templates.default].to_plotly_json()


@figure_builder
def capsule_bars(scores: np.ndarray, names, predicted: int | tuple[int, ...], title: str, y_title: str | None = None) -> dict:
    """One bar per class, the predicted one(s) in red; every class named on the axis (digits
    are categories, not a number line)."""
    chosen = {predicted} if isinstance(predicted, int) else set(predicted)
    colors = ["#d62728" if i in chosen else "#7f7f7f" for i in range(len(scores))]
    bar = {
        "type": "bar",
        "x": [str(n) for n in names],
        "y": np.asarray(scores),
        "marker": {"color": colors},
        "text": [f"{s:.2f}" for s in scores],
        "textposition": "outside",
    }
    y_title = t("capsule length") if y_title is None else y_title
    layout = {"title": {"text": title}, "xaxis": {"type": "category"}, "yaxis": {"range": [0, 1.1], "title": {"text": y_title}}}
    return {"data": [bar], "layout": {**layout, "height": 300, "margin": {**MARGIN}}}


def squash_curve() -> go.Figure:
    n = np.linspace(0, 5, 200)
    fig = go.Figure(go.Scatter(x=n, y=n**2 / (1 + n**2), name="|v| = |s|^2 / (1 + |s|^2)"))
    fig.add_trace(go.Scatter(x=n, y=np.minimum(n, 1), name=t("|s| (clipped at 1)"), line=dict(dash="dot")))
    fig.update_layout(
        xaxis_title=t("|s| (length before squash)"),
        yaxis_title=t("|v| (length after)"),
        height=280,
        margin=dict(l=10, r=10, t=10, b=10),
    )
    return fig


@figure_builder
def effect_bars(effect: np.ndarray) -> dict:
    bar = {"type": "bar", "x": [f"d{i}" for i in range(len(effect))], "y": np.asarray(effect)}
    layout = {"title": {"text": t("Change per dimension (-0.25 vs +0.25)")}, "yaxis": {"title": {"text": t("mean |pixel change|")}}}
    return {"data": [bar], "layout": {**layout, "height": 260, "margin": {**MARGIN}}}


def curves(points: list[dict], y: str, title: str) -> go.Figure:
    fig = go.Figure(go.Scatter(x=[p["step"] for p in points], y=[p[y] for p in points], mode="lines"))
    fig.update_layout(title=title, xaxis_title=t("step"), height=260, margin=dict(l=10, r=10, t=40, b=10))
    return fig


@figure_builder
def class_maps(maps: np.ndarray, names, title: str, zrange: tuple[float, float] | None = None, per_row: int = 5) -> dict:
    """(J, G, G) small maps on one colour scale, one class each, `per_row` to a row (each named
    above it) so that on a phone's narrow chart each map is still several pixels a square. Drawn
    as a single heatmap with blank cells between the maps: one trace redraws several times faster
    in the browser than J subplots."""
    J, G, _ = maps.shape
    per = min(per_row, J)
    rows = -(-J // per)
    z = np.full((rows * (G + 2) - 2, per * (G + 1) - 1), np.nan)  # two blank rows between rows of maps: room for their names
    who = np.full(z.shape, "", dtype=object)
    for j in range(J):
        r, c = divmod(j, per)
        z[r * (G + 2) : r * (G + 2) + G, c * (G + 1) : c * (G + 1) + G] = maps[j]
        who[r * (G + 2) : r * (G + 2) + G, c * (G + 1) : c * (G + 1) + G] = str(names[j])
    ys, xs = np.indices(z.shape)
    cell = np.stack([who, ys % (G + 2) + 1, xs % (G + 1) + 1], -1)  # rows and columns from 1, as the tour counts them
    heat = {
        "type": "heatmap",
        "z": z,
        "customdata": cell,
        "colorscale": VIRIDIS,
        "hoverongaps": False,
        "hovertemplate": t("capsule {capsule}, row {row}, column {column}: {value}").format(
            capsule="%{customdata[0]}", row="%{customdata[1]}", column="%{customdata[2]}", value="%{z:.3f}"
        )
        + "<extra></extra>",
        "colorbar": {"orientation": "h", "thickness": 12, "y": -0.02, "yanchor": "top", "len": 0.9},  # below: the maps keep the width
    }
    if zrange is not None:
        heat["zmin"], heat["zmax"] = zrange
    names_above = [
        {
            "x": divmod(j, per)[1] * (G + 1) + (G - 1) / 2,
            "y": divmod(j, per)[0] * (G + 2) - 0.6,
            "text": str(names[j]),
            "showarrow": False,
            "yanchor": "bottom",
            "font": {"size": 13},
        }
        for j in range(J)
    ]
    layout = {
        "annotations": names_above,
        "xaxis": {"visible": False, "constrain": "domain"},
        "yaxis": {"autorange": "reversed", "visible": False, "scaleanchor": "x", "constrain": "domain"},
        "title": {"text": title},
        "height": 90 + 17 * z.shape[0],
        "margin": {"l": 10, "r": 10, "t": 60, "b": 50},
        "plot_bgcolor": "rgba(0,0,0,0)",
    }
    return {"data": [heat], "layout": layout}


@figure_builder
def heatmap(z: np.ndarray, title: str, x_title: str, y_title: str, x=None, y=None, zmin=None, zmax=None, height=320, hover=None) -> dict:
    """`hover`: a name for each square (the shape of z), shown with its value."""
    heat = {"type": "heatmap", "z": np.asarray(z), "colorscale": VIRIDIS}
    heat |= {k: v for k, v in (("x", x), ("y", y), ("zmin", zmin), ("zmax", zmax)) if v is not None}
    if hover is not None:
        heat |= {"customdata": hover, "hovertemplate": "%{customdata}: %{z:.3f}<extra></extra>"}
    yaxis = {"title": {"text": y_title}} | (
        {"type": "category"} if y is not None else {}
    )  # named rows (classes): every name shown, "2" not read as a number
    layout = {"title": {"text": title}, "xaxis": {"title": {"text": x_title}}, "yaxis": yaxis}
    return {"data": [heat], "layout": {**layout, "height": height, "margin": {**MARGIN}}}


@figure_builder
def lines(
    y: np.ndarray,
    names,
    title: str,
    x_title: str,
    y_title: str,
    log_y: bool = False,
    x=None,
    y_range=None,
    line=None,
    legend_below: bool = False,
) -> dict:
    """One line per column of y (T, K), x = 1..T unless given; `y_range` fixes the y axis, `line`
    draws a dashed horizontal line at that value; `legend_below` puts long legend names under the
    chart, where they leave a phone's narrow chart its width."""
    x = np.arange(1, len(y) + 1) if x is None else x
    y = np.asarray(y)
    traces = [{"type": "scatter", "x": x, "y": y[:, k], "name": str(n), "mode": "lines+markers"} for k, n in enumerate(names)]
    xaxis: dict = {"title": {"text": x_title}}
    yaxis: dict = {"title": {"text": y_title}}
    layout: dict = {"title": {"text": title}, "xaxis": xaxis, "yaxis": yaxis, "height": 300, "margin": {**MARGIN}}
    if len(x) <= 12 and np.issubdtype(np.asarray(x).dtype, np.integer):
        xaxis["dtick"] = 1  # iterations are whole: no tick at 1.5
    if log_y:
        yaxis["type"] = "log"
    if legend_below:
        layout |= {"legend": {"orientation": "h", "yanchor": "top", "y": -0.3, "x": 0}, "height": 380}
    if y_range is not None:
        yaxis["range"] = list(y_range)
    if line is not None:
        layout["shapes"] = [
            {
                "type": "line",
                "line": {"color": "grey", "dash": "dash"},
                "x0": 0,
                "x1": 1,
                "xref": "x domain",
                "y0": line,
                "y1": line,
                "yref": "y",
            }
        ]
    return {"data": traces, "layout": layout}


def overlay(image: np.ndarray, heat: np.ndarray, scale: int = 8, lo: float | None = None, hi: float | None = None) -> Image.Image:
    """The input in grey (a colour one by its brightness) with a coarse map (upsampled to its size)
    laid over it in red, from `lo` (none) to `hi` (full red); by default the map's own range:
    couplings differ by little."""
    image = grey(image)
    H, W = image.shape
    h = np.asarray(Image.fromarray(heat.astype(np.float32)).resize((W, H), Image.BILINEAR))
    lo = h.min() if lo is None else lo
    span = (h.max() if hi is None else hi) - lo
    h = np.clip((h - lo) / span, 0, 1) if span > 0 else np.zeros_like(h)
    g = np.clip(image, 0, 1) * 0.6
    rgb = np.stack([np.maximum(g, h), g * (1 - h), g * (1 - h)], -1)
    return Image.fromarray((rgb * 255).astype(np.uint8), "RGB").resize((W * scale, H * scale), Image.NEAREST)


def two_colour(image: np.ndarray, first: np.ndarray, second: np.ndarray, scale: int = 6) -> Image.Image:
    """Fig. 5's overlay: the input in dim grey, one reconstruction in red and the other in green
    (pixels both explain turn yellow)."""
    g = np.clip(image, 0, 1) * 0.35
    rgb = np.stack([np.maximum(g, np.clip(first, 0, 1)), np.maximum(g, np.clip(second, 0, 1)), g], -1)
    H, W = image.shape
    return Image.fromarray((rgb * 255).astype(np.uint8), "RGB").resize((W * scale, H * scale), Image.NEAREST)


# Segmentation colours by label (capsviz.analysis.multimnist): background, unexplained, first, second, both
SEGMENT_COLOURS = np.array([[0, 0, 0], [110, 110, 255], [230, 40, 40], [40, 200, 40], [240, 220, 40]], np.uint8)


def segments_image(segments: np.ndarray, scale: int = 6) -> Image.Image:
    """(H, W) segment labels -> an RGB map: red first, green second, yellow both, blue unexplained ink."""
    H, W = segments.shape
    return Image.fromarray(SEGMENT_COLOURS[segments], "RGB").resize((W * scale, H * scale), Image.NEAREST)


def clear_side(series: dict[str, list[float]], level: float) -> str:
    """Where a label on a horizontal line at `level` stays clear of the lines: at the end (left or
    right) where the nearest line is farthest from it, on the side of the level away from them
    (Plotly's annotation_position, e.g. "bottom left")."""
    ends = {"left": [v[0] for v in series.values()], "right": [v[-1] for v in series.values()]}
    side = max(ends, key=lambda e: min((abs(y - level) for y in ends[e]), default=0.0))
    above = sum(y > level for y in ends[side]) >= len(ends[side]) / 2
    return f"{'bottom' if above else 'top'} {side}"


def sweep_lines(x, series: dict[str, list[float]], title: str, x_title: str, y_title: str, chance: float | None = None) -> go.Figure:
    """One line per named series over x (accuracy versus transform strength or epsilon). The legend
    sits above the plot, under the title, so the lines keep a phone's width; the "guessing" line's
    label sits where the lines leave it clear (clear_side)."""
    colours = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd"]  # the capsule model first, in the bars' red
    fig = go.Figure(
        [
            go.Scatter(x=list(x), y=v, name=name, mode="lines+markers", line_color=colours[k % 4])
            for k, (name, v) in enumerate(series.items())
        ]
    )
    if chance is not None:
        fig.add_hline(y=chance, line_dash="dot", annotation_text=t("guessing"), annotation_position=clear_side(series, chance))
    fig.update_layout(
        title=dict(text=title, y=1, yanchor="top", pad=dict(t=10)),  # on top: the legend goes between it and the plot
        xaxis_title=x_title,
        yaxis_title=y_title,
        yaxis_range=[0, 101],
        height=400,
        margin=dict(l=10, r=10, t=110, b=10),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0),  # above the plot: the lines keep the full width
    )
    return fig


def lines_by_epoch(histories: dict[str, list[dict]]) -> go.Figure:
    """Test error (%) by epoch, one line per checkpoint, from the histories training stores. The
    legend sits above the plot, so the long checkpoint names never squeeze the lines on a phone."""
    fig = go.Figure(
        [
            go.Scatter(x=[h["epoch"] for h in hist], y=[h["metrics"]["test_error"] for h in hist], name=name, mode="lines+markers")
            for name, hist in histories.items()
        ]
    )
    ticks = [0.2, 0.3, 0.5, 1, 2, 3, 5, 10, 20, 30, 50, 100]  # labelled in full (plotly would write 0.5 as "5")
    fig.update_layout(
        xaxis_title=t("epoch"),
        yaxis_title=t("test error %"),
        height=340 + 22 * len(histories),  # room for the legend's rows on a narrow screen
        margin=dict(l=10, r=10, t=20, b=10),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0),  # above the plot: the lines keep the full width
    )
    fig.update_yaxes(type="log", tickvals=ticks, ticktext=[f"{t:g}" for t in ticks])
    return fig


def seed_strip(errors: dict[str, list[float]], seeds: tuple[int, ...], title: str) -> go.Figure:
    """One dot per training seed for each routing a model was trained with, and the routing's mean
    as a bar: how far apart the seeds land, beside how far apart the routings do."""
    colours = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd"]
    fig = go.Figure()
    for k, (name, values) in enumerate(errors.items()):
        colour = colours[k % len(colours)]
        fig.add_bar(
            x=[name], y=[sum(values) / len(values)], marker_color=colour, opacity=0.35, name=t("{name}: mean", name=name), showlegend=False
        )
        fig.add_scatter(
            x=[name] * len(values),
            y=values,
            mode="markers",
            marker=dict(color=colour, size=10, line=dict(color="black", width=1)),
            text=[t("seed {seed}", seed=s) for s in seeds],
            hovertemplate="%{text}: %{y:.2f}%<extra></extra>",
            showlegend=False,
        )
    fig.update_layout(
        title=title, yaxis_title=t("test error %"), xaxis_title=t("trained with"), height=320, margin=dict(l=10, r=10, t=40, b=10)
    )
    return fig


def grouped_bars(
    groups: list[str], series: dict[str, list[float | None]], title: str, y_title: str, errors: dict | None = None
) -> go.Figure:
    """One bar per series in each group (the routing lab: a model per group, a routing per bar),
    with optional +- error bars per series; None leaves a gap."""
    colours = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e"]
    fig = go.Figure()
    for k, (name, values) in enumerate(series.items()):
        err = None if errors is None else dict(type="data", array=errors[name], visible=True)
        fig.add_bar(x=groups, y=values, name=name, marker_color=colours[k % len(colours)], error_y=err)
    fig.update_layout(
        title=dict(text=title, y=1, yanchor="top", pad=dict(t=10)),  # on top: the legend goes between it and the bars
        yaxis_title=y_title,
        barmode="group",
        height=420,
        margin=dict(l=10, r=10, t=110, b=10),
        legend=dict(title_text=t("run with"), orientation="h", yanchor="bottom", y=1.0, x=0),  # above: the bars keep a phone's width
    )
    fig.update_xaxes(tickangle=-45, automargin=True)  # long model names slanted, whole, apart from each other
    return fig
