"""Reproduction: the papers' result tables filled from the checkpoints' own measurements."""

import streamlit as st

from capsviz.analysis.reproduction import tables
from capsviz.analysis.rules import RULES
from capsviz.checkpoint import total_training
from capsviz.glossary import help_text
from capsviz.text import plain
from capsviz.viz import lines_by_epoch
from pages.active import checkpoints
from pages.common import require_router
from pages.drawn import chart
from pages.linking import link_choice
from pages.state import STATE

require_router()

st.title("Reproduction: our checkpoints beside the papers")
st.markdown(
    "Every number in the *ours* columns is the test error stored in a checkpoint's metadata, measured by "
    "`python -m capsviz evaluate` (or at the end of training) on the test split; the numbered notes under the table say how. "
    "Empty cells give the command that would fill them. A dagger (†) marks a checkpoint smaller than the paper's model."
)

found = [(p.name, m) for p, m in checkpoints()]

shown = tables(found)
st.header("Sabour et al. 2017, Table 1 (test error %)", help=help_text("test_error"))
st.markdown(shown.table1)  # plain: the core made each name and note plain
if shown.notes:
    st.markdown("**How each was measured**\n\n" + "\n".join(f"{k}. {n}" for k, n in enumerate(shown.notes, 1)))
if shown.todo:
    with st.expander(f"Commands that would fill the {len(shown.todo)} empty cells (·)"):
        st.code("\n".join(shown.todo), language="bash")

st.header("Hinton et al. 2018 (test error %)", help=help_text("test_error"))
st.markdown(shown.em)  # plain: the core made each name plain

if shown.gaps:
    st.header("How far from the papers", help=help_text("test_error"))
    st.markdown("\n".join(f"- {where}: {gap.words()}" for where, gap in shown.gaps))  # plain: the core made each name plain
    st.caption(RULES["beyond chance"])

st.header("Test error by epoch", help=help_text("test_error"))
by_dataset: dict[str, dict] = {}
for n, m in found:
    if h := total_training(m)["history"]:  # fine-tuned: the whole chain
        by_dataset.setdefault(m.dataset or "?", {})[n] = h
if by_dataset:
    # one chart per dataset: their epochs are not comparable (a MultiMNIST epoch is 60,000 fresh pairs)
    link_choice(STATE.curves, [plain(d) for d in by_dataset], plain(next(iter(by_dataset))), "dataset")
    for tab, (ds, history) in zip(
        st.tabs([plain(d) for d in by_dataset], key=STATE.curves.key, bind="query-params"), by_dataset.items(), strict=True
    ):
        tab.plotly_chart(chart(lines_by_epoch, history), key=f"history_{ds}")
else:
    st.info("No checkpoint carries a training history yet.")
