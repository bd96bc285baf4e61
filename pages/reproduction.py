"""Reproduction: the papers' result tables filled from the checkpoints' own measurements."""

import streamlit as st

from capsviz.analysis.reproduction import EM_RESULTS, is_paper_size, table1
from capsviz.checkpoint import total_training
from capsviz.glossary import help_text
from capsviz.text import plain
from capsviz.viz import lines_by_epoch
from pages.common import checkpoints, plain_chart, require_router

require_router()

st.title("Reproduction: our checkpoints beside the papers")
st.markdown(
    "Every number in the *ours* columns is the test error stored in a checkpoint's metadata, measured by "
    "`python -m capsviz evaluate` (or at the end of training) on the test split; the numbered notes under the table say how. "
    "Empty cells give the command that would fill them. A dagger (†) marks a checkpoint smaller than the paper's model."
)

found = [(p.name, m) for p, m in checkpoints()]

st.header("Sabour et al. 2017, Table 1 (test error %)", help=help_text("test_error"))
rows = table1(found)
header = (
    "| method | routing | reconstruction | MNIST ours | MNIST paper | MultiMNIST ours | MultiMNIST paper |\n|---|---|---|---|---|---|---|\n"
)
notes, todo = [], []


def fmt(cell) -> str:
    if cell.ours is None:
        if cell.paper is not None:
            todo.append(cell.how)
        return "·" if cell.paper is not None else "-"
    notes.append(f"`{cell.checkpoint}`: {cell.how}")
    return f"**{cell.ours:.2f}**{'' if cell.paper_size else ' †'} ({len(notes)})"


body = ""
for r in rows:
    m, mm = r["cells"]["mnist"], r["cells"]["multimnist"]
    routing = "-" if r["routing"] is None else str(r["routing"])
    rec = "-" if r["reconstruction"] is None else ("yes" if r["reconstruction"] else "no")
    paper = lambda c: "-" if c.paper is None else f"{c.paper}"
    body += f"| {r['method']} | {routing} | {rec} | {fmt(m)} | {paper(m)} | {fmt(mm)} | {paper(mm)} |\n"
st.markdown(header + body)
if notes:
    st.markdown("**How each was measured**\n\n" + "\n".join(f"{k}. {n}" for k, n in enumerate(notes, 1)))
if todo:
    with st.expander(f"Commands that would fill the {len(todo)} empty cells (·)"):
        st.code("\n".join(todo), language="bash")

st.header("Hinton et al. 2018 (test error %)", help=help_text("test_error"))
matrix = [(n, m) for n, m in found if m.config.routing == "em" and m.metrics.measured]
em = "| dataset | model | paper | ours |\n|---|---|---|---|\n"
for ds, model, err in EM_RESULTS:
    ours = [f"{m.metrics.test_error:.2f}{'' if is_paper_size(m) else ' †'} (`{n}`)" for n, m in matrix if m.dataset == ds]
    if not ours:
        ours = (
            ["· `python -m capsviz train --model matrix-small --dataset mnist --out checkpoints/matrix-small-mnist.safetensors`"]
            if ds == "mnist"
            else ["not reproducible in capsviz yet: smallNORB is readable (`python -m capsviz data`) but not a training dataset"]
        )
    em += f"| {ds} | {model} | {err} | {'; '.join(ours)} |\n"
st.markdown(em)

st.header("Test error by epoch", help=help_text("test_error"))
by_dataset: dict[str, dict] = {}
for n, m in found:
    if h := total_training(m)["history"]:  # fine-tuned: the whole chain
        by_dataset.setdefault(m.dataset or "?", {})[n] = h
if by_dataset:
    # one chart per dataset: their epochs are not comparable (a MultiMNIST epoch is 60,000 fresh pairs)
    for tab, (ds, history) in zip(
        st.tabs([plain(d) for d in by_dataset], key="curves", bind="query-params"), by_dataset.items(), strict=True
    ):
        tab.plotly_chart(plain_chart(lines_by_epoch(history)), key=f"history_{ds}")
else:
    st.info("No checkpoint carries a training history yet.")
