"""What the app process sets up once and every page's helpers lean on: the model folder, public
error text, chart text made plain, the router check, one torch thread per served process and the
teacher-only cache clearing. Not a page itself (app.py lists the pages); the other shared parts are
pages/sidebar.py, active.py, inputs.py, linking.py, classroom.py, language.py, drawn.py and state.py."""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

import numpy as np
import streamlit as st

from capsviz.devices import serving_threads
from capsviz.i18n import t
from capsviz.paths import app_dir
from capsviz.text import plain
from pages.state import STATE

_run = threading.local()  # the script thread's run: whether app.py's router is running its page


@contextlib.contextmanager
def routed():
    """app.py runs its page inside this; a page run outside it is Streamlit's legacy run of the file."""
    _run.routed = True
    try:
        yield
    finally:
        _run.routed = False


def require_router() -> None:
    """Hand a legacy run back to app.py's st.navigation router.

    The design fixes the page folder's name as pages/, which Streamlit also reads as a legacy
    multipage folder: on a fresh server whose first requests are deep links (a class following a
    shared /explorer?model=... URL), it runs that page file directly, without app.py (so without
    reading the link), and lists every file in pages/ in the sidebar. Turning the legacy mode off
    and rerunning runs app.py, which routes to the same URL. Every session whose run began in
    legacy mode reruns, not only the one that turns it off: sessions opened at the same moment
    all began so. (Streamlit 1.67: PagesManager.uses_pages_directory.)"""
    from streamlit.runtime.pages_manager import PagesManager

    if getattr(PagesManager, "uses_pages_directory", False) or not getattr(_run, "routed", False):
        PagesManager.uses_pages_directory = False
        st.rerun()


def checkpoint_dir() -> Path:
    """checkpoints/ beside app.py; CAPSVIZ_CHECKPOINTS points elsewhere (tests, shared folders)."""
    return Path(os.environ.get("CAPSVIZ_CHECKPOINTS", app_dir() / "checkpoints"))


def public(message) -> str:
    """A message as a browser may show it: checkpoints named by their name in the model folder,
    never by the server's path to it (given, absolute or through a symlink)."""
    text = str(message)
    folder = checkpoint_dir()
    prefixes = sorted({str(folder), str(folder.absolute()), str(folder.resolve())}, key=len, reverse=True)
    for prefix in prefixes:
        text = text.replace(prefix + os.sep, "")
    for prefix in prefixes:
        text = text.replace(prefix, t("the model folder"))
    return text


TRACE_TEXTS = ("name", "x", "y", "text", "hovertext", "labels", "customdata")  # a chart trace's values that Plotly shows as text


def plain_chart(fig):
    """`fig` (a Plotly figure) with every text in it made plain for Plotly, which reads a few
    HTML tags, links among them: titles, axis and legend names, categories, tick and hover text,
    annotations. capsviz's charts use no markup of their own. Returns `fig`."""
    for trace in fig.data:
        for attr in TRACE_TEXTS:
            if attr in trace and trace[attr] is not None:
                trace[attr] = plain_nested(trace[attr])
    layout = fig.layout
    if layout.title.text:
        layout.title.text = plain_nested(layout.title.text)
    for axis in [*fig.select_xaxes(), *fig.select_yaxes()]:
        if axis.title.text:
            axis.title.text = plain_nested(axis.title.text)
        if axis.ticktext:
            axis.ticktext = plain_nested(list(axis.ticktext))
    for note in layout.annotations:
        note.text = plain_nested(note.text)
    if layout.legend.title.text:
        layout.legend.title.text = plain_nested(layout.legend.title.text)
    return fig


def plain_nested(value):
    """Every text in `value` (a text, an array, or lists at any depth: a chart's names, categories
    and hover data) made plain for Plotly; numbers as they were."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "OUS":
            return value
        value = value.tolist()
    if isinstance(value, str):
        return plain(value, "chart")
    if isinstance(value, list | tuple):  # a text in a list made plain at once: hover names are thousands of them
        return [plain(v, "chart") if type(v) is str else plain_nested(v) for v in value]
    return value


def said_rows(rows: list, studies=()) -> tuple[list, list]:
    """The lab's rows and seed studies with their names (model, architecture) made plain, for
    the sentences that lab.sentences writes in Markdown about them."""
    from dataclasses import replace

    rows = [replace(r, model=plain(r.model), extra={k: plain(v) if k == "architecture" else v for k, v in r.extra.items()}) for r in rows]
    return rows, [replace(s, architecture=plain(s.architecture)) for s in studies]


def guard_clear_cache() -> None:
    """Let only the teacher's sessions clear the server's caches. Streamlit clears every cache of
    the process for a "clear cache" message from any browser (the menu, the C key, or a script
    sending it in a loop), making every student's models and test sets load again (Streamlit 1.67:
    AppSession._handle_clear_cache_request); a student's message is ignored."""
    from streamlit.runtime.app_session import AppSession

    original = getattr(AppSession, "_handle_clear_cache_request", None)
    if original is None or getattr(original, "capsviz_guard", False):
        return

    def handle(session) -> None:
        try:
            teacher = session._session_state[STATE.teacher.key] is True
        except (KeyError, AttributeError, TypeError):
            teacher = False
        if teacher:
            original(session)

    handle.capsviz_guard = True
    AppSession._handle_clear_cache_request = handle


guard_clear_cache()


serving_threads()
