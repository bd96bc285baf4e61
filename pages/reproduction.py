"""Reproduction: the papers' result tables filled from the checkpoints' own measurements."""

import streamlit as st

from capsviz.analysis.reproduction import tables
from capsviz.analysis.rules import rule_words
from capsviz.checkpoint import total_training
from capsviz.i18n import t, tn
from capsviz.text import plain
from capsviz.viz import lines_by_epoch
from pages.active import checkpoints
from pages.common import require_router
from pages.drawn import chart
from pages.linking import link_choice
from pages.state import STATE
from pages.terms import term_help, uses

require_router()
uses("test_error", "epoch")  # the glossary entries its text names (pages.terms)

st.title(t("Reproduction: our checkpoints beside the papers"))
st.markdown(
    t(
        "Every number in the *ours* columns is the test error stored in a checkpoint's metadata, measured by "
        "`python -m capsviz evaluate` (or at the end of training) on the test split; the numbered notes under the table say "
        "how. Empty cells give the command that would fill them. A dagger (†) marks a checkpoint smaller than the paper's model."
    )
)

# the tables are wider than a phone: each scrolls sideways on its own instead of being cut at the edge, and a
# cell keeps its name or number on one line (a Chinese or Japanese name would break anywhere)
st.html(
    "<style>[data-testid='stMain'] [data-testid='stMarkdownContainer'] table { display: block; overflow-x: auto; }"
    " [data-testid='stMain'] [data-testid='stMarkdownContainer'] td { white-space: nowrap; }</style>"
)

found = [(p.name, m) for p, m in checkpoints()]

shown = tables(found)
st.header(t("Sabour et al. 2017, Table 1 (test error %)"), help=term_help("test_error"))
st.markdown(shown.table1)  # plain: the core made each name and note plain
if shown.notes:
    st.markdown(t("**How each was measured**") + "\n\n" + "\n".join(f"{k}. {n}" for k, n in enumerate(shown.notes, 1)))
if shown.todo:
    with st.expander(
        tn("The command that would fill the {n} empty cell (·)", "Commands that would fill the {n} empty cells (·)", len(shown.todo))
    ):
        st.code("\n".join(shown.todo), language="bash")

st.header(t("Hinton et al. 2018 (test error %)"), help=term_help("test_error"))
st.markdown(shown.em)  # plain: the core made each name plain

if shown.gaps:
    st.header(t("How far from the papers"), help=term_help("test_error"))
    said = [t("{where}: {said}", where=where, said=gap.words()) for where, gap in shown.gaps]
    st.markdown("\n".join(f"- {line}" for line in said))  # plain: the core made each name plain
    st.caption(rule_words("beyond chance"))

st.header(t("Test error by epoch"), help=term_help("test_error"))
by_dataset: dict[str, dict] = {}
for n, m in found:
    if h := total_training(m)["history"]:  # fine-tuned: the whole chain
        by_dataset.setdefault(m.dataset or "?", {})[n] = h
if by_dataset:
    # one chart per dataset: their epochs are not comparable (a MultiMNIST epoch is 60,000 fresh pairs)
    link_choice(STATE.curves, [plain(d) for d in by_dataset], plain(next(iter(by_dataset))), t("dataset"))
    for tab, (ds, history) in zip(
        st.tabs([plain(d) for d in by_dataset], key=STATE.curves.key, bind="query-params"), by_dataset.items(), strict=True
    ):
        tab.plotly_chart(chart(lines_by_epoch, history), key=f"history_{ds}")
else:
    st.info(t("No checkpoint carries a training history yet."))
