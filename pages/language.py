"""The language a session's words are in: the link's `lang=`, else the browser's languages, until
the student picks another in the sidebar. Per session, never per server: the choice lives in the
session's state, and capsviz.i18n reads it for every word made in that session's runs (fragments
and callbacks included)."""

from __future__ import annotations

import threading

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from capsviz import i18n
from capsviz.i18n import LANGUAGES, t
from capsviz.text import plain
from capsviz.viz.teach import font_note
from pages.state import STATE, choices_again, link_asks


def _session_language() -> str | None:
    """The language of the session whose run asks, or None outside a session's run (a training
    thread, a test calling the core)."""
    if get_script_run_ctx(suppress_warning=True) is None:
        return None
    return STATE.language.get(None)


i18n.set_resolver(_session_language)


def _load_catalogs() -> None:
    for lang in LANGUAGES:
        i18n.translations(lang)  # kept for the process (read and compiled once: BENCH.md, "A student's session")


def preload_catalogs() -> threading.Thread | None:
    """In a served process, every language's catalog read in the background as the app starts,
    so the first student to ask for a language does not wait for it (nothing under AppTest,
    whose runtime is a stand-in: a test reads only the catalogs it uses)."""
    from streamlit.runtime import Runtime

    if not (Runtime.exists() and type(Runtime.instance()) is Runtime):
        return None
    loading = threading.Thread(target=_load_catalogs, name="capsviz-catalogs", daemon=True)
    loading.start()
    return loading


preload_catalogs()


def accepted(header: str | None) -> list[str]:
    """The languages of an Accept-Language header, most wanted first ("zh-CN,zh;q=0.9,en;q=0.8")."""
    ranked = []
    for n, part in enumerate((header or "").split(",")):
        tag, _, q = part.strip().partition(";q=")
        try:
            weight = float(q) if q else 1.0
        except ValueError:
            weight = 0.0
        if tag and weight > 0:
            ranked.append((-weight, n, tag))
    return [tag for _, _, tag in sorted(ranked)]


def browser_languages() -> list[str]:
    """What the browser says its user reads: navigator.language, then Accept-Language's list."""
    found = [st.context.locale] if st.context.locale else []
    return found + accepted(st.context.headers.get("Accept-Language"))


def choose_language() -> str:
    """The session's language for this run, decided on its first run from the link, else the
    browser; a link asking for a language capsviz does not have gets a note. Sets it for the run."""
    if not STATE.language.present:
        asked = link_asks(STATE.language.param)
        if asked is not None and i18n.normalise(asked) is None:
            STATE.language_asked.set(asked)
        STATE.language.set(i18n.best([asked, *browser_languages()]))
    lang = i18n.set_language(STATE.language.get())
    STATE.language.set(lang)
    return lang


def language_switch() -> None:
    """The sidebar's switch (labelled in all three languages, so anyone finds it), and the link
    carries the choice: a shared link opens in the sender's language."""
    st.selectbox(
        "Language · 语言 · 言語",
        list(LANGUAGES),
        key=STATE.language.key,
        format_func=LANGUAGES.get,
        help=t("The language of every word capsviz shows you; other students keep their own."),
    )
    lang = i18n.set_language(STATE.language.get())
    if STATE.language_drawn.get(lang) != lang:
        # the browser keeps a choice as the words of the option it showed, and Streamlit sends a value
        # only when it changed: the old language's words stayed in the boxes, and radios showed no choice
        choices_again(skip=STATE.language.key)
    STATE.language_drawn.set(lang)
    if font_note(lang):
        st.caption(font_note(lang))
    st.query_params[STATE.language.param] = STATE.language.get()
    asked = STATE.language_asked.get(None)
    if asked:
        STATE.language_asked.pop()
        st.info(
            t(
                "The link asks for the language {asked}, which capsviz does not have: it is shown in {shown}.",
                asked=plain(repr(asked[:20])),
                shown=LANGUAGES[STATE.language.get()],
            ),
            icon=":material/translate:",
        )
