"""The glossary in one place: every symbol and term the pages use, in plain words, with the same
text as their hover help (capsviz.glossary)."""

import streamlit as st

from capsviz.glossary import entries
from capsviz.text import plain
from pages.common import require_router
from pages.state import STATE

require_router()
st.title("Glossary")
st.markdown(
    "Every symbol, word and abbreviation the pages use, in plain words and in the order the tour meets them. The same "
    "text appears when you hover a ? beside a control. Symbols follow the papers: i counts the lower "
    "capsules, j the upper (class) capsules. Search by a symbol, a plain word or the papers' own term (coupling "
    "coefficient, E-step): the entries known by that name come first, then those that mention it."
)
query = st.text_input("Find a term", key=STATE.term.key, bind="query-params", placeholder="coupling coefficient, R, E-step, chance ...")
found = entries(query)
if not found:
    st.info(f"No entry mentions “{plain(query)}”. Clear the box to see them all.")
for t in found:
    st.markdown(f"**{t.named}**: {t.explanation}")  # plain: the glossary's own words
    if t.also:
        st.caption("Also: " + plain(", ".join(t.also)))
