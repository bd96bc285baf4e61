"""The glossary in one place: every symbol and term the pages use, in plain words, with the same
text as their hover help (capsviz.glossary)."""

import streamlit as st

from capsviz.glossary import entries
from capsviz.text import plain
from pages.common import require_router

require_router()
st.title("Glossary")
st.markdown(
    "Every symbol and word the pages use, in plain words and in the order the tour meets them. The same "
    "text appears when you hover a ? beside a control. Symbols follow the papers: i counts the lower "
    "capsules, j the upper (class) capsules."
)
query = st.text_input("Find a term", key="term", bind="query-params", placeholder="coupling, R, squash ...")
found = entries(query)
if not found:
    st.info(f"No entry mentions “{plain(query)}”. Clear the box to see them all.")
for t in found:
    st.markdown(f"**{t.named}**: {t.explanation}")  # plain: the glossary's own words
