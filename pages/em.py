"""EM routing inspector: Fig. 2 (and B.2) of Hinton et al. (2018), one image at a time."""

import streamlit as st

from capsviz.analysis.explain import (
    NEAREST,
    PAPER_ZOOM,
    conv_assignment_words,
    distance_words,
    em_share_words,
    em_shares,
    position_words,
    verdict_words,
    zoom_limit,
)
from capsviz.analysis.routing import em_trace
from capsviz.glossary import label, term
from capsviz.i18n import gap, t
from capsviz.memo import digest
from capsviz.registry import shows
from capsviz.text import plain
from capsviz.viz import heatmap, lines, png_bytes, to_image
from capsviz.viz.animation import gif_bytes
from capsviz.viz.explain import HISTOGRAM_KEY, HISTOGRAM_X, em_histogram_frames, em_histograms
from pages.active import for_image, page_model
from pages.common import require_router
from pages.drawn import chart, kept, picture, show
from pages.inputs import pick_image
from pages.linking import keep_within, link_choice
from pages.state import STATE
from pages.terms import term_help, uses

require_router()
uses("em_routing", "pose", "vote", "a_in", "a_j", "R", "E_step", "M_step")  # the glossary entries its text names (pages.terms)
st.title(t("EM routing, iteration by iteration"))
st.markdown(
    t(
        "Each class capsule is a Gaussian (a cloud) over 16 pose entries; every lower capsule casts a **vote** for "
        "each class's pose, and EM decides which class explains which vote: the share is the **assignment R**. "
        "The histograms reproduce Fig. 2 of the paper, one panel per class: how far each vote lies from that "
        "class's mean pose, counted by its assignment. At iteration 1 every vote is shared evenly; look at whether "
        "the winner's panel gathers the near votes (bars at the left) in later iterations while the other panels "
        "keep the far ones. The numbers under the figure say how much this model actually does."
    )
)

model, meta, path = page_model(
    lambda meta: shows(meta.config, "em"),
    t("matrix capsules with EM routing"),
    t(  # i18n: {name} and {family} are filled in by the page: keep them as they are
        "**{name}** is {family}. This page shows EM routing between matrix capsules; no matrix-capsule model is in the "
        "model folder; train one: `python -m capsviz train --model matrix-small --compile --out "
        "checkpoints/my-matrix-small.safetensors`."
    ),
)
names = meta.class_names[: meta.config.num_classes]
picked = pick_image(meta.image_dataset, names, meta.config.in_size, model)
if picked is None:
    st.stop()
image, image_label = picked
keep_within(STATE.iterations, 1, 5, meta.config.routing_iterations, t("EM iterations"))
T = st.slider(
    t("EM iterations at inference"),
    1,
    5,
    meta.config.routing_iterations,
    key=STATE.iterations.key,
    bind="query-params",
    help=t("The weights are the same; only the number of EM iterations changes"),
)


tr = for_image(em_trace, model, image, T)
pred = int(tr.a[-1].argmax())
seen = digest(STATE.model_key.get(), image, T)  # what names this trace for the figures kept for every session


def histogram_pngs(tr, limit: float, names, it: int) -> tuple[str, list[tuple[bytes, int]]]:
    """Fig. 2's title and its panels as (PNG, width), encoded once."""
    title, panels = em_histograms(tr, limit, names, it)
    return title, [(png_bytes(p), p.width) for p in panels]


@st.fragment
def iteration_view(tr, image, label_, pred: int) -> None:
    """One iteration's figures and the convolutional layers': their widgets rerun only this."""
    if T > 1:
        keep_within(STATE.t, 1, T, T, t("iteration"))
        it = (
            st.slider(
                t("Show iteration"),
                1,
                T,
                T,
                key=STATE.t.key,
                bind="query-params",
                help=term_help("M_step", "E_step"),
            )
            - 1
        )
    else:
        it = 0
        st.info(
            t(
                "EM runs once here, so there is nothing to step through: the first M-step fits each class capsule to votes "
                "assigned evenly (R = 1/{J} each), and no E-step re-assigns them. Raise **EM iterations at inference** to "
                "watch the assignments move.",
                J=len(names),
            )
        )
    left, right = st.columns([1, 3])
    shown = [plain(n) for n in names]  # every class name made plain here, and the label below
    verdict = verdict_words(shown[pred], plain(label_), shown)
    show(
        left,
        picture(to_image, image, width=168),
        t("input, prediction {prediction} ({verdict})", prediction=shown[pred], verdict=verdict),
        168,
    )  # plain: names made plain above
    left.metric(label("lambda"), f"{tr.lambdas[it]:.3f}", help=term_help("lambda"))
    with right:
        link_choice(STATE.zoom, [False, True], False, t("zoom on the nearest votes"))
    zoom_on = right.toggle(
        t("Zoom in on the nearest votes (Fig. 2's zoom)"),
        value=False,
        key=STATE.zoom.key,
        bind="query-params",
        help=t(
            "The paper zooms to distances below {zoom}; where this model has (almost) no votes that close, the zoom shows its "
            "nearest {nearest}% and says so",
            zoom=f"{PAPER_ZOOM:g}",
            nearest=NEAREST,
        ),
    )
    zoom = zoom_limit(tr.distances, zoom_on)
    sh = em_shares(tr)
    right.markdown(
        t("**Shown: vote distances from 0 to {limit}**: {why}.", limit=f"{zoom.limit:g}", why=plain(zoom.why))
        + gap()
        + distance_words(tr)
        + "  \n"
        + em_share_words(sh, shown[sh.winner], meta.config.routing_iterations, plain(label_), shown)  # plain: made plain above
    )
    title, panels = kept(histogram_pngs, tr, zoom.limit, names, it, key=(seen, zoom.limit, list(names), it))
    st.markdown(f"**{title}**")  # plain: numbers only
    with st.container(horizontal=True, key="em_panels"):  # as many panels to a row as the screen holds: readable on a phone
        for png, width in panels:
            show(st, png, width=width)
    st.caption(t("{key}; x axis: {axis}.", key=t(HISTOGRAM_KEY), axis=t(HISTOGRAM_X)))
    a, b = st.columns(2)
    stem = f"em-{STATE.model_key.get().rsplit('/', 1)[-1].split('.')[0]}"
    a.download_button(
        t("Download this iteration (PNG)"),
        lambda: png_bytes(em_histogram_frames(tr, zoom.limit, names, it)[0]),
        f"{stem}-iteration{it + 1}.png",
        "image/png",
        key="em_png",
        on_click="ignore",
    )
    b.download_button(
        t("Download all {T} iterations (animated GIF)", T=T),
        lambda: gif_bytes(em_histogram_frames(tr, zoom.limit, names)),
        f"{stem}-iterations.gif",
        "image/gif",
        key="em_gif",
        on_click="ignore",
    )

    st.plotly_chart(
        chart(
            heatmap,
            tr.R[it].T,
            t("{R}, iteration {k}", R=label("R"), k=it + 1),
            t("lower capsule i"),
            t("class"),
            y=[str(n) for n in names],
            zmin=0,
            zmax=1,
            height=300,
        ),
        key="em_R",
    )
    st.caption(
        t(
            "{R} at iteration {k}: the share of each lower capsule's vote each class explains. Each column is one lower capsule "
            "i (numbered by position, then type); its colours add up to 1 over the classes. A bright row means that class "
            "explains many votes; at iteration 1 every cell is 1/{J}.",
            R=label("R"),
            k=it + 1,
            J=len(names),
        )
    )

    st.subheader(t("Convolutional capsule layers"))
    link_choice(STATE.layer, STATE.layer.choices, "convcaps1", t("layer"))
    layer = st.selectbox(t("Layer"), STATE.layer.choices, key=STATE.layer.key, bind="query-params")
    res = tr.layers[layer]
    P = res.R.shape[2]
    n = int(round(P**0.5))
    keep_within(STATE.position, 0, P - 1, P // 2, t("output position"))
    pos = st.slider(
        t("Output position (numbered row by row from the top left)"),
        0,
        P - 1,
        P // 2,
        key=STATE.position.key,
        bind="query-params",
        help=t(
            "The layer's outputs sit on a {n} x {n} grid; position 0 is the top-left corner, {last} the top-right, {n} the start "
            "of the second row",
            n=n,
            last=n - 1,
        ),
    )
    where = position_words(pos, n)
    st.caption(t("Position {pos} is {where}.", pos=pos, where=where))
    t_layer = min(it, res.R.shape[0] - 1)
    R_layer = res.R[t_layer, 0].numpy()  # (positions, K*K*types, J)
    R = R_layer[pos]
    st.plotly_chart(
        chart(
            heatmap,
            R.T,
            t("{layer}, position {pos}: assignments R", layer=layer, pos=pos),
            t("lower capsule (kernel position x type)"),
            t("upper capsule type"),
            zmin=0,
            height=280,
        ),
        key="em_conv_R",
    )
    st.caption(
        t(
            "The assignments R at {where}, one column per lower capsule in its 3x3 receptive field (by kernel position, then "
            "type), one row per upper capsule type.",
            where=where,
        )
        + gap()
        + conv_assignment_words(R_layer, pos, t_layer)
    )


iteration_view(tr, image, image_label, pred)

st.subheader(t("Across iterations"))
a, b, c = st.columns(3)
a.plotly_chart(chart(lines, tr.a, names, t("Class {a_j}", a_j=label("a_j")), t("iteration"), t("a_j (activation)")), key="em_act")
b.plotly_chart(
    chart(lines, tr.sigma.mean(-1), names, t("{sigma}, mean of 16 entries", sigma=label("sigma")), t("iteration"), t("sigma (spread)")),
    key="em_sigma",
)
c.plotly_chart(
    chart(lines, tr.R.sum(1), names, t("Total assignment each class receives"), t("iteration"), t("sum_i R_ij (total assignment)")),
    key="em_mass",
)
st.caption(  # each chart by its name, not its place: on a phone the three stack
    t(
        "{a_j}: {a_j_means} {sigma}: {sigma_means} sum_i R_ij (total assignment): the assignments R summed "
        "over all lower capsules; at iteration 1 each class receives an equal share, 1/{J} of them.",
        a_j=label("a_j"),
        a_j_means=term("a_j").explain(),
        sigma=label("sigma"),
        sigma_means=term("sigma").explain(),
        J=len(names),
    )
)
