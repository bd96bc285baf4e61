"""DigitCaps explorer: Fig. 3 and Fig. 4 of Sabour et al. (2017)."""

import numpy as np
import streamlit as st

from capsviz.analysis import STEPS, decode, dimension_effect, perturbation_grid
from capsviz.analysis.explain import EXPLORER_INTRO, effect_words, offset_words
from capsviz.analysis.links import linked_offsets
from capsviz.analysis.questions import longest_capsule, strongest_dimension
from capsviz.analysis.routing import canvas_words, centred, on_canvas
from capsviz.glossary import label as glossary_label
from capsviz.i18n import keeping, t
from capsviz.registry import shows
from capsviz.text import plain
from capsviz.viz import capsule_bars, effect_bars, png_bytes, to_image
from capsviz.viz.explain import labelled_grid
from pages.active import answer, page_model
from pages.asking import ask
from pages.common import require_router
from pages.drawn import chart, picture, show
from pages.inputs import dimension_sliders, pick_image
from pages.linking import keep_link_note, link_number, show_link_note
from pages.sidebar import site_button
from pages.state import STATE, link_asks
from pages.terms import term_help, uses

require_router()
uses("digitcaps", "dimension", "pose", "reconstruction")  # the glossary entries its text names (pages.terms)

st.title(t("DigitCaps explorer"))
st.markdown(t(EXPLORER_INTRO))

model, meta, path = page_model(
    lambda meta: shows(meta.config, "explorer") and meta.config.decodes,
    t("a CapsNet with a decoder, whose capsules it redraws"),
    t(  # no values: page_model fills in {name} and {family}
        "**{name}** is {family} without a decoder. Matrix capsules (EM routing) and the baseline CNNs have no "
        "reconstruction network, so there is nothing to perturb: choose a dynamic-routing CapsNet trained with reconstruction in the sidebar."
    ),
)

dataset = meta.image_dataset
names = meta.class_names
size = meta.config.in_size

pad = on_canvas(dataset, size)  # a MultiMNIST model: a single 28x28 digit (test set, drawing or upload) centred on its canvas
if pad:
    st.info(canvas_words(size, pad), icon=":material/info:")
    st.page_link("pages/multimnist.py", label=t("MultiMNIST: pairs of digits"), icon=":material/arrow_outward:")
picked = pick_image(dataset, names, size - 2 * pad, None if pad else model)
if picked is None:
    st.stop()
image, label = centred(picked[0], pad), picked[1]


# What a class following one link computes alike is computed once for every session: the model's
# answer for an image (common.answer), and the perturbation grid of one of its capsules.
@st.cache_data(max_entries=64, show_spinner=False)
def grid_of(model_key: str, _model, image_bytes: bytes, capsule: int, _vector, title: str):  # _vector: the image's capsule
    grid = perturbation_grid(_model, _vector, capsule)
    rows, steps = [f"d{d}" for d in range(grid.shape[0])], [f"{s:+.2f}" if s else "0" for s in STEPS]
    shown = labelled_grid(grid, rows, steps, scale=2)  # the page's subheader names it: no title to shrink on a phone
    titled = labelled_grid(grid, rows, steps, scale=2, title=title)  # the PNG a teacher downloads names itself
    return png_bytes(shown), png_bytes(titled), dimension_effect(grid)  # PNG once: st.image shows the bytes as they are


pred = answer(STATE.model_key.get(), model, image)
# predict, then see: the lengths (the bar chart, the capsule list) stay hidden until the student answers
question = longest_capsule(STATE.model_key.get(), image, pred.scores, pred.predicted, names, label)
if not ask(question):
    show(st, picture(to_image, image, width=168), t("The input image (its label is shown once you answer)"), 168)
    st.stop()
qp = st.query_params
linked_capsule = link_number(STATE.capsule_index, 0, len(names) - 1, pred.predicted, t("capsule"))  # a shared link's choice, once
default_capsule = pred.predicted if linked_capsule is None else linked_capsule  # else the longest, for every new image
capsule = st.selectbox(
    t("Capsule to decode"),
    list(range(len(names))),
    index=default_capsule,
    format_func=keeping(lambda j: t("{name} (length {length})", name=plain(names[j]), length=f"{pred.scores[j]:.2f}")),
    key=f"capsule_{path.stem}_{hash(image.tobytes())}",
    help=term_help("length", "reconstruction"),
)
qp["capsule"] = str(capsule)
show_link_note(STATE.capsule_index.param, capsule)
D = len(pred.capsules[capsule])  # the capsule's dimensions: 16 in the papers' models, its family's own otherwise
if not STATE.dims.present:  # a shared link's slider values, applied once
    dims = keep_link_note(STATE.dims.param, linked_offsets(link_asks(STATE.dims.param) or "", D, 0.25, 0.05)).value
    STATE.dims.set(np.asarray(dims, np.float32))

view = f"{path.stem}:{hash(image.tobytes())}:{capsule}"
if STATE.dims_view.setdefault(view) != view:  # a new image or capsule: the sliders start again at 0
    STATE.dims_view.set(view)
    STATE.dims.set(np.zeros(D, np.float32))

a, b, c = st.columns([1, 2, 1])
show(a, picture(to_image, image, width=168), t("input (label {label})", label=plain(label)), 168)
b.plotly_chart(
    chart(
        capsule_bars,
        pred.scores,
        names,
        pred.predicted,
        t("Prediction: {name}", name=names[pred.predicted]),
        y_title=glossary_label("length"),
    ),
    key="lengths",
)
rebuilt = decode(model, pred.capsules[capsule], capsule)
show(c, picture(to_image, rebuilt, width=168), t("reconstruction from capsule {name}", name=plain(names[capsule])), 168)


@st.fragment
def sliders():
    """Only this fragment reruns while sliding: one decoder pass, a few milliseconds."""
    st.subheader(t("Perturb one dimension at a time"), help=term_help("dimension", "reconstruction"))
    st.caption(
        t(
            "Each slider adds an offset to one of the capsule's {n} dimensions (d0 to d{last}) before the decoder redraws it. "
            "Drag a slider, or focus one and use the arrow keys (Home and End jump to the ends). "
            "The sliders go back to 0 when you pick another image or capsule.",
            n=D,
            last=D - 1,
        )
    )
    cols = st.columns([3, 2])
    with cols[0]:
        deltas = dimension_sliders(STATE.dims.get(), key=f"sliders:{view}")
    with cols[1]:
        rec = decode(model, pred.capsules[capsule], capsule, deltas)
        st.query_params["dims"] = ",".join(f"{v:g}" for v in deltas)
        show_link_note(STATE.dims.param, tuple(round(float(v), 2) + 0.0 for v in deltas))
        changed = ", ".join(f"d{d} {v:+.2f}" for d, v in enumerate(deltas) if v)  # symbols and numbers: no words
        show(st, picture(to_image, rec, width=224), t("perturbed: {changed}", changed=changed) if changed else t("perturbed: none"), 224)
        if said := offset_words(rebuilt, rec, deltas):
            st.caption(said)


sliders()

title = t("capsule {name}: dimension (rows) + offset (columns)", name=names[capsule])  # drawn on the grid: kept per language
img_png, titled_png, effect = grid_of(STATE.model_key.get(), model, image.tobytes(), capsule, pred.capsules[capsule], title)
# predict, then see: the grid and its measured effects wait for the student's answer
if not ask(strongest_dimension(STATE.model_key.get(), image, capsule, names[capsule], effect)):  # ask makes it plain
    site_button("explorer", meta)
    st.stop()
st.subheader(t("Perturbation grid for capsule {name} (Fig. 4)", name=plain(names[capsule])))
st.caption(
    t(
        "Each row is one dimension (d0 at the top to d15 at the bottom); each column adds one offset, from {first} at "
        "the left to {last} at the right, to that dimension alone (the middle column, 0, is the plain reconstruction). "
        "Beside it: how much each row changes the drawing, measured.",
        first=f"{STEPS[0]:+.2f}",
        last=f"{STEPS[-1]:+.2f}",
    )
)
left, right = st.columns([3, 2])
show(left.container(key="perturbation_grid"), img_png, t("{n} dimensions (rows) x 11 offsets (columns), the offsets written on top", n=D))
left.download_button(
    t("Download grid as PNG"), titled_png, file_name=f"{path.stem}-capsule{capsule}-grid.png", mime="image/png", key="grid_png"
)
right.plotly_chart(chart(effect_bars, effect), key="effect")
right.caption(effect_words(effect, rebuilt, plain(names[capsule]), STEPS[0], STEPS[-1]))  # plain: its one name is made plain here

site_button("explorer", meta)
