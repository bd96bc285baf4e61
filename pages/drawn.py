"""Figures drawn once per app process, for every session that shows the same thing.

A class following one link asks for the same charts and pictures, and a student moving a slider
back asks for one already drawn. `chart` and `picture` key a figure by its builder and every
argument it is built from (capsviz.memo.digest: arrays by their bytes), so a session is shown a
kept figure only when it would have drawn exactly that one. An argument that cannot be keyed by
value (a model, a trace object) must be named by `key=` instead: what it stands for (a model's
key and an image's digest, say)."""

from __future__ import annotations

import os
from dataclasses import replace

import streamlit as st
from PIL import Image

from capsviz.i18n import language
from capsviz.memo import Memo, digest
from capsviz.text import MAX_SENTENCES, plain
from capsviz.viz import Finished, png_bytes
from capsviz.viz.room import for_room
from capsviz.viz.teach import RoutingPieces
from pages.common import TRACE_TEXTS, plain_chart, plain_nested
from pages.projector import big

# Kept figures' bytes (their JSON or PNG): most are 5 to 50 KB, so a class's pages fit in
# far less than this; $CAPSVIZ_FIGURE_CACHE_MB changes it.
BUDGET = int(float(os.environ.get("CAPSVIZ_FIGURE_CACHE_MB", "256")) * 2**20)
ROOM_GROW = 1.6  # projector mode: a picture's 12 px text shown at about 20 px (capsviz.viz.room.ROOM)
MAX_WIDTH = 1460  # st.image's widest picture (Streamlit 1.67: image_utils.MAXIMUM_CONTENT_WIDTH)


@st.cache_resource(show_spinner=False)
def _memo() -> Memo:
    return Memo(BUDGET)


def _name(build) -> str:
    """The builder's name, part of every key: a module-level function's, which names one builder
    (a lambda's or a nested function's would name several), with its file: Streamlit runs every
    page as the module `__main__`, so two pages' builders of one name differ only by their file."""
    name = f"{build.__module__}.{build.__qualname__}"
    if "<" in name:
        raise ValueError(f"{name}: keep figures of module-level builders only")
    return f"{name}@{build.__code__.co_filename}"


def _key(build, key, args, kwargs, *more):
    """The key of `build`'s result: its name, the language of its words and its arguments' values,
    or `key` in their place."""
    return digest(_name(build), language(), *more, key if key is not None else (args, kwargs))


def _size(value) -> int:
    """About the bytes a kept result holds: its arrays', bytes' and strings' sizes, through
    dicts, lists, tuples and objects' fields."""
    total, todo, seen = 0, [value], set()
    while todo:
        x = todo.pop()
        if isinstance(x, str | bytes):
            total += len(x)
        elif hasattr(x, "nbytes"):
            total += int(x.nbytes)
        elif id(x) in seen:
            continue
        elif isinstance(x, Finished):  # its plotly template is one object shared by every chart: not counted
            seen.add(id(x))
            spec = x.to_dict()
            todo += [spec["data"], {k: v for k, v in spec["layout"].items() if k != "template"}]
        elif isinstance(x, dict):
            seen.add(id(x))
            todo.extend(x.values())
        elif isinstance(x, list | tuple) and x and type(x[0]) in (float, int):  # a row of numbers, counted at once
            total += 8 * len(x)
        elif isinstance(x, list | tuple | set):
            seen.add(id(x))
            todo.extend(x)
        elif hasattr(x, "__dict__"):
            seen.add(id(x))
            todo.extend(vars(x).values())
        else:
            total += 8
    return total


def plain_spec(spec: dict) -> dict:
    """A figure's spec (the dict plotly.js draws) with its texts made plain, where `plain_chart`
    makes a go.Figure's plain: trace names, categories, text and hover text; titles, axis names
    and tick texts, notes and the legend's title. Returns `spec`, changed in place."""

    def fix_title(owner: dict) -> None:
        title = owner.get("title")
        if isinstance(title, dict) and title.get("text"):
            title["text"] = plain_nested(title["text"])
        elif isinstance(title, str):
            owner["title"] = plain_nested(title)

    for trace in spec["data"]:
        for attr in TRACE_TEXTS:
            if trace.get(attr) is not None:
                trace[attr] = plain_nested(trace[attr])
    layout = spec.setdefault("layout", {})
    fix_title(layout)
    for name, axis in layout.items():
        if name.startswith(("xaxis", "yaxis")) and isinstance(axis, dict):
            fix_title(axis)
            if axis.get("ticktext"):
                axis["ticktext"] = plain_nested(list(axis["ticktext"]))
    for note in layout.get("annotations", []):
        if "text" in note:
            note["text"] = plain_nested(note["text"])
    if isinstance(layout.get("legend"), dict):
        fix_title(layout["legend"])
    return spec


def chart(build, *args, key=None, **kwargs) -> Finished:
    """`build(*args, **kwargs)`, a plotly figure made plain for the page (`plain_chart`), built
    once for every session that asks with the same arguments (or the same `key`). A
    `figure_builder`'s spec is taken as it is, without a go.Figure in between. In projector mode
    its text is made large enough for a room (capsviz.viz.room)."""
    room = big()

    def make() -> Finished:
        if hasattr(build, "spec"):
            spec = plain_spec(build.spec(*args, **kwargs))
            return Finished(for_room(spec) if room else spec)
        fig = plain_chart(build(*args, **kwargs))
        return Finished(for_room(fig.to_dict())) if room else Finished(fig)

    return _memo().get(_key(build, key, args, kwargs, room), make, _size)


def live_chart(fig) -> Finished:
    """A chart drawn anew on every run (a training run's curves): made plain, and large in projector mode."""
    fig = plain_chart(fig)
    return Finished(for_room(fig.to_dict())) if big() else fig


def picture(build, *args, width: int | None = None, key=None, **kwargs) -> bytes:
    """`build(*args, **kwargs)`, a PIL image, as PNG bytes made once for every session that asks
    with the same arguments (or the same `key`), no wider than `width` (made smaller as st.image
    would make it, once). Show them with `show`: st.image then neither resizes nor encodes them."""

    def make() -> bytes:
        img = build(*args, **kwargs)
        limit = width or MAX_WIDTH
        if img.width > limit:
            img = img.resize((limit, round(img.height * limit / img.width)), Image.BILINEAR)
        return png_bytes(img)

    return _memo().get(_key(build, key, args, kwargs, width), make, len)


def pieces(build, *args, key=None, **kwargs) -> RoutingPieces:
    """`build(*args, **kwargs)`, a routing figure in pieces (capsviz.viz.teach.RoutingPieces), made
    once for every session that asks as `picture` makes a picture: its pictures as PNG bytes, each
    for `show` at its own size (a phone's narrow screen shows them one under the other)."""

    def make() -> RoutingPieces:
        p = build(*args, **kwargs)
        return replace(p, uppers=[png_bytes(u) for u in p.uppers], bars=png_bytes(p.bars))

    return _memo().get(_key(build, key, args, kwargs, "pieces"), make, _size)


def show(place, png: bytes | list[bytes], caption: str | list[str] | None = None, width: int | str = "content") -> None:
    """PNG bytes from `picture` (or a list of them) in `place` (st or a column), `width` as
    st.image takes it: as PNG, so st.image keeps them as they are (it would encode a picture
    without transparency again, as JPEG, on every run). In projector mode a picture is shown
    ROOM_GROW times its width (never wider than its column), so the text drawn in it reads from
    the back of a room."""
    if big() and (width in ("content", None) or isinstance(width, int)):
        natural = width if isinstance(width, int) else png_width(png[0] if isinstance(png, list) else png)
        width = round(natural * ROOM_GROW) if natural else width
    place.image(png, caption=caption, width=width, output_format="PNG")  # plain: the callers' captions, checked where they call show


def show_pieces(drawn: RoutingPieces, caption: str) -> None:
    """A routing figure from `pieces` laid out for the screen it is on: its title and key as text,
    the upper capsules' pictures side by side (one under the other on a phone, each at its own
    size), the share bars under them, then what the bars show and `caption` (made plain by the
    caller). The figure's own words are made plain here: a tour's name its model's classes."""
    st.markdown(f"**{plain(drawn.title, limit=MAX_SENTENCES)}**")
    st.caption("  \n".join(plain(k, limit=MAX_SENTENCES) for k in drawn.key))  # one line each
    for column, png in zip(st.columns(len(drawn.uppers)), drawn.uppers, strict=True):
        show(column, png)
    show(st, drawn.bars)
    # the note on a line of its own: it is no sentence, and the caption's first words would run on from it
    st.caption(f"{plain(drawn.note, limit=MAX_SENTENCES)}  \n{caption}")  # plain: the caller's caption


def png_width(png: bytes) -> int | None:
    """A PNG's width from its header, None for anything else."""
    return int.from_bytes(png[16:20], "big") if png[:8] == b"\x89PNG\r\n\x1a\n" else None


def kept(build, *args, key=None, **kwargs):
    """`build(*args, **kwargs)`, any read-only result (words, numbers), kept as `chart` keeps figures."""
    return _memo().get(_key(build, key, args, kwargs), lambda: build(*args, **kwargs), _size)
