"""The glossary in one place: every symbol and term the pages use, in plain words, with the same
text as their hover help (capsviz.glossary), in the reader's language; outside English each entry
gives its English name in brackets, so a student can find it in the papers."""

import streamlit as st

from capsviz.glossary import entries
from capsviz.i18n import SOURCE, language, t
from capsviz.text import plain
from pages.common import require_router
from pages.state import STATE

require_router()
st.title(t("Glossary"))
st.markdown(
    t(
        "Every symbol, word and abbreviation the pages use, in plain words and in the order the tour meets them. The same "
        "text appears when you hover a ? beside a control. Symbols follow the papers: i counts the lower "
        "capsules, j the upper (class) capsules. Search by a symbol, a plain word or the papers' own term (coupling "
        "coefficient, E-step): the entries known by that name come first, then those that mention it."
    )
)
query = st.text_input(
    t("Find a term"),
    key=STATE.term.key,
    bind="query-params",
    placeholder=t("coupling coefficient, R, E-step, chance ..."),
)
found = entries(query)
if not found:
    st.info(t("No entry mentions “{query}”. Clear the box to see them all.", query=plain(query)))
for entry in found:
    st.markdown(t("{term}: {explanation}", term=entry.heading(), explanation=entry.explain()))  # plain: the glossary's own words
    if entry.also and language() == SOURCE:
        st.caption(t("Also: {names}", names=plain(", ".join(entry.also))))
    elif entry.also:  # the other English names, in brackets: the ones to look for in the English papers
        st.caption(t("Also, in English: {names}", names=plain(", ".join(entry.also))))
