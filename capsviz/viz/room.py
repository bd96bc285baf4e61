"""Charts for a room: a plotly spec's every text made at least `ROOM` px, the size read from the
back of a classroom on a 1920x1080 projector (pages.projector), and its height and margins grown
to hold the larger text. Any chart of any page goes through `for_room` in projector mode, so a
page's figures need no projector code of their own."""

from __future__ import annotations

ROOM = 20  # px: the smallest text a projector shows
TITLE = ROOM + 4
GROW = 1.35  # a chart's height (and fixed margins) for text about 1.6 times plotly's 12 px
AXES = ("xaxis", "yaxis", "zaxis")
TRACE_FONTS = ("textfont", "insidetextfont", "outsidetextfont")


def _font(owner: dict, name: str = "font", least: int = ROOM) -> None:
    """owner[name].size at least `least` (named even where unset: Streamlit's chart theme sets a
    smaller one wherever a figure leaves it out)."""
    font = owner.get(name)
    font = dict(font) if isinstance(font, dict) else {}
    size = font.get("size")
    if isinstance(size, list | tuple):
        font["size"] = [max(s, least) if isinstance(s, int | float) else least for s in size]
    else:
        font["size"] = max(size, least) if isinstance(size, int | float) else least
    owner[name] = font


def _title(owner: dict, least: int = ROOM) -> None:
    title = owner.get("title")
    if isinstance(title, str):
        title = {"text": title}
    if isinstance(title, dict):
        title = dict(title)
        _font(title, least=least)
        owner["title"] = title


def _colorbar(trace: dict) -> None:
    for owner in (trace, trace.get("marker") if isinstance(trace.get("marker"), dict) else None):
        if owner is not None and isinstance(owner.get("colorbar"), dict):
            bar = dict(owner["colorbar"])
            _font(bar, "tickfont")
            _title(bar)
            owner["colorbar"] = bar


def for_room(spec: dict) -> dict:
    """`spec` (a figure's dict: data and layout) with every text at least ROOM px: the chart's,
    its title's, every axis's title and ticks, the legend's, each note's, the hover label's, the
    traces' own text and colour bars; a fixed height and fixed margins grown by GROW. Returns a
    new spec; `spec` is not changed."""
    layout = dict(spec.get("layout") or {})
    _font(layout)
    _title(layout, TITLE)
    for name in list(layout):
        if name.startswith(AXES) and isinstance(layout[name], dict):
            axis = dict(layout[name])
            _font(axis, "tickfont")
            _title(axis)
            if axis.get("type") == "log":
                axis.setdefault("dtick", 1)  # powers of ten only: plotly draws the digits between them at 3/4 size
            layout[name] = axis
    for name in ("xaxis", "yaxis"):  # the first axes, also where the figure did not name them
        if name not in layout:
            layout[name] = {}
            _font(layout[name], "tickfont")
            _title(layout[name])
    legend = dict(layout.get("legend") or {})
    _font(legend)
    _title(legend)
    layout["legend"] = legend
    hover = dict(layout.get("hoverlabel") or {})
    _font(hover)
    layout["hoverlabel"] = hover
    notes = []
    for note in layout.get("annotations") or []:
        note = dict(note)
        _font(note)
        notes.append(note)
    if notes:
        layout["annotations"] = notes
    for name in list(layout):
        if name.startswith("coloraxis") and isinstance(layout[name], dict):
            layout[name] = dict(layout[name])
            _colorbar(layout[name])
    if isinstance(layout.get("height"), int | float):
        layout["height"] = round(layout["height"] * GROW)
    if isinstance(layout.get("margin"), dict):
        layout["margin"] = {k: round(v * GROW) if k in "lrtb" and isinstance(v, int | float) else v for k, v in layout["margin"].items()}
    data = []
    for trace in spec.get("data") or []:
        trace = dict(trace)
        for name in TRACE_FONTS:
            if name in trace or (name == "textfont" and trace.get("text") is not None):
                _font(trace, name)
        _colorbar(trace)
        data.append(trace)
    return {**spec, "data": data, "layout": layout}
