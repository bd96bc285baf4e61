"""The glossary where a page uses it: every term a page explains in a control's or a figure's
help (`term_help`, or named with `uses`) is listed under the page, each a link to its entry on
the glossary page, so a student on a phone finds the words without the sidebar."""

import streamlit as st

from capsviz.glossary import help_text, links
from capsviz.i18n import gap, language, t
from pages.state import STATE


def uses(*keys: str) -> None:
    """The page uses these glossary entries (their words are in its text)."""
    have = STATE.page_terms.get()
    STATE.page_terms.set([*have, *(k for k in keys if k not in have)])  # once each: a fragment's reruns add nothing


def term_help(*keys: str) -> str:
    """capsviz.glossary.help_text for a control's or a caption's help, the entries noted as used."""
    uses(*keys)
    return help_text(*keys)


def start_page() -> None:
    """Before a page runs: no entry used yet."""
    STATE.page_terms.set([])


def glossary_links(page: str) -> None:
    """After the page ran: the entries it used, each a link to the glossary (not on the glossary itself)."""
    keys = STATE.page_terms.get()
    if not keys or page == "glossary":
        return
    st.divider()
    st.markdown(
        t("Words on this page, each a link to its glossary entry:") + gap() + links(keys, language())
    )  # plain: names made plain by links
