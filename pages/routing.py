"""Dynamic routing inspector: Procedure 1 and Appendix A of Sabour et al. (2017), one image at a time."""

import numpy as np
import streamlit as st

from capsviz.adapter import how_it_computes
from capsviz.analysis import as_input_batch
from capsviz.analysis.routing import (
    attention_trace,
    attention_words,
    canvas_words,
    capsule_axes,
    capsule_labels,
    centred,
    centred_batch,
    convergence_words,
    coupling_summary,
    detail_words,
    dynamic_sweep_words,
    dynamic_trace,
    entropy_figure,
    flat,
    iteration_sweep,
    length_words,
    map_words,
    mean_b_change,
    on_canvas,
    once_words,
    summary_words,
    sweep_of_trace,
    sweep_words,
    trained_with_words,
    unplaced_words,
)
from capsviz.config import user_dataset
from capsviz.glossary import class_words
from capsviz.i18n import gap, t
from capsviz.registry import FAMILIES, ROUTINGS, either, routing_words, shows
from capsviz.text import plain
from capsviz.viz import capsule_bars, class_maps, heatmap, lines, overlay, png_bytes, to_image
from capsviz.viz.animation import coupling_frames, gif_bytes
from pages.active import for_image, page_model, test_set
from pages.common import require_router
from pages.drawn import chart, kept, picture, show
from pages.inputs import pick_image
from pages.linking import keep_within, link_choice
from pages.sidebar import site_button
from pages.state import STATE
from pages.terms import term_help, uses

require_router()
uses("dynamic_routing", "u_hat", "c", "b", "agreement", "entropy", "length")  # the glossary entries its text names (pages.terms)


def one_pass_view(model, image, label, names, layout) -> None:
    """One pass of self-attention routing (Efficient-CapsNet's): its couplings beside the prior it
    learned, and the same capsules run with dynamic routing for comparison."""
    st.title(t("Self-attention routing, in one pass"))
    st.markdown(
        t(
            "This model (Efficient-CapsNet, Mazzia et al. 2021) routes without iterations. For each class, every primary "
            "capsule's **prediction** u_hat is compared with the sum of all the predictions for that class (the **attention** "
            "a = u_hat . sum of u_hat, scaled by 1/sqrt(16)); **couplings** c = softmax over the classes of a, as dynamic "
            "routing's softmax over b. Then s_j = sum_i (c_ij + b_ji) u_hat_j|i, where b is a **prior** learned in training, "
            "the same for every image."
        )
    )
    key = STATE.model_key.get()
    tr = for_image(attention_trace, model, image, key=key)
    winner = int(tr.lengths.argmax())
    I, J = tr.c.shape
    left, right = st.columns([1, 3])
    show(
        left,
        picture(to_image, image, width=168),
        t("input (label {label}), prediction {prediction}", label=plain(label), prediction=plain(names[winner])),
        168,
    )
    left.plotly_chart(chart(capsule_bars, tr.lengths, names, winner, t("Class capsule lengths")), key="attention_lengths")
    right.plotly_chart(
        chart(heatmap, tr.c.T, t("Couplings c"), t("primary capsule"), t("class"), y=[str(n) for n in names], zmin=0, zmax=1, height=300),
        key="attention_c",
    )
    right.plotly_chart(
        chart(heatmap, tr.prior.T, t("Learned prior b"), t("primary capsule"), t("class"), y=[str(n) for n in names], height=300),
        key="attention_prior",
    )
    right.caption(
        t(
            "Above: the couplings c, the share of each primary capsule's vote for each class. Below: the learned prior b, "
            "added to c, the same for every image."
        )
    )
    right.caption(term_help("self_attention", "c", "prior"))
    if layout.about:  # where its primary capsules come from, since no map places them
        right.caption(t(layout.about))
    st.caption(attention_words(tr, winner, plain(names[winner])))  # plain: its one name is made plain here
    st.subheader(t("The same capsules with dynamic routing, 1 to 10 iterations"))
    sweep = for_image(iteration_sweep, model, image, 10, key=key)
    st.plotly_chart(
        chart(lines, sweep["lengths"], names, t("Lengths by iteration count"), t("dynamic-routing iterations"), "|v_j|"),
        key="attention_sweep",
    )
    st.caption(sweep_words(sweep["predictions"], winner, plain(names[winner])))  # plain: its one name is made plain here


model, meta, path = page_model(
    lambda meta: shows(meta.config, "routing"),
    t("a {models}, whose routing it shows", models=either("routing")),
    t(
        "**{{name}}** is {{family}}. This page shows the routing of vector capsules; pick a {models} in the sidebar (matrix "
        "capsules have the **EM routing** page).",
        models=either("routing"),
    ),
)
pad = on_canvas(meta.image_dataset, meta.config.in_size)  # a MultiMNIST model: a test digit centred on its canvas


def picked_image(names) -> tuple[np.ndarray, str]:
    """The image to route, on the canvas the model reads (a MultiMNIST model's 36x36: a digit picked at
    28x28 and centred, with a note and a link to the page for pairs); the page stops without one."""
    if pad:
        st.info(canvas_words(meta.config.in_size, pad), icon=":material/info:")
        st.page_link("pages/multimnist.py", label=t("MultiMNIST: pairs of digits"), icon=":material/arrow_outward:")
    picked = pick_image(meta.image_dataset, names, meta.config.in_size - 2 * pad, None if pad else model)
    if picked is None:
        st.stop()
    return centred(picked[0], pad), picked[1]


routing = meta.config.routing  # the family's own routing, which the page shows as its entry says
layout = FAMILIES[meta.config.family].primary_layout(meta.config)  # where its primary capsules sit
if ROUTINGS[routing].view == "attention":
    names = meta.class_names
    one_pass_view(model, *picked_image(names), names, layout)
    st.stop()
words = class_words(meta)  # digit capsules for digits; class capsules for Fashion-MNIST and a user's own images
st.title(t("Dynamic routing, iteration by iteration"))
st.markdown(
    t(
        "Every primary capsule (a small part detector) makes a **prediction** u_hat for each of the {capsules} and splits its "
        "vote over them with **couplings** c, which start equal (1/J each, J the number of classes; 1/I each for a model whose "
        "couplings sum to 1 over the I input capsules). Each routing iteration adds the **agreement** u_hat . v (how well a "
        "prediction points the same way as the {capsule}'s output v) to the **routing logits** b, and c = softmax(b) shifts "
        "towards the capsules a prediction agrees with (Procedure 1).",
        capsules=words.capsules,
        capsule=words.capsule,
    )
)
st.caption(
    t(
        "How far the couplings move away from uniform depends on the model and on the number of iterations: each caption "
        "below says by how much, and at which iteration. The **Routing playgrounds** page shows the same routing function on "
        "a few capsules you place yourself."
    )
)

if how := how_it_computes(meta):  # a model written elsewhere: the routing it really does
    st.caption(t("This model was imported: {how}.", how="; ".join(how)))
if getattr(meta.config, "couplings", routing) != routing:
    st.info(
        t(
            "**{model}** was trained with {trained}, not with {routing}. This page runs its capsules with {routing} instead: the "
            "weights are the ones that training made for the other couplings.",
            model=plain(path.stem),
            trained=trained_with_words(meta.config),
            routing=routing_words(routing),
        ),
        icon=":material/info:",
    )
if layout.about:  # no grid to draw the couplings on: the capsules in the model's order
    st.caption(t(layout.about))
names = meta.class_names
image, label = picked_image(names)
keep_within(STATE.iterations, 1, 10, meta.config.routing_iterations, t("routing iterations"))
T = st.slider(
    t("Routing iterations at inference"),
    1,
    10,
    meta.config.routing_iterations,
    key=STATE.iterations.key,
    bind="query-params",
    help=t("The weights are the same; only the number of routing iterations changes.") + gap() + term_help("iteration"),
)


Tmax = 10
full = for_image(dynamic_trace, model, image, Tmax, routing)  # one run of the most iterations: every shorter run is its start
tr = full.first(T)
winner = int(tr.lengths[-1].argmax())


@st.fragment
def couplings_view(tr, image, label, winner: int) -> None:
    """The maps of one iteration: moving the iteration or the detailed capsule reruns only this."""
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
                help=term_help("iteration", "agreement", "b", "c"),
            )
            - 1
        )
    else:
        it = 0
        st.info(once_words(tr))
    if tr.layout.grid:
        maps_view(tr, it, image, label, winner)
    else:
        capsules_view(tr, it, image, label, winner)


def capsules_view(tr, it: int, image, label, winner: int) -> None:
    """Iteration `it`'s couplings of primary capsules that sit on no grid: every capsule's coupling
    to every class, in the model's order."""
    left, right = st.columns([1, 3])
    show(
        left,
        picture(to_image, image, width=168),
        t("input (label {label}), prediction {prediction}", label=plain(label), prediction=plain(names[winner])),
        168,
    )
    title, caption = unplaced_words(tr, it, words.capsule, words.thing)
    y = [str(n) for n in names]
    right.plotly_chart(
        chart(heatmap, tr.c[it].T, title, t("primary capsule"), t("class"), y=y, zmin=0, zmax=2 * tr.uniform, height=300),
        key="coupling_capsules",
    )
    right.caption(caption)  # plain: numbers and the class words only


def maps_view(tr, it: int, image, label, winner: int) -> None:
    """Iteration `it`'s coupling maps over the primary capsules' grid, and one class's detailed map."""
    maps = tr.coupling_maps(it)
    even = flat(maps)
    zrange = (0, 2 * tr.uniform)  # all equal: a scale around uniform, not around nothing
    every = np.stack([tr.coupling_maps(k) for k in range(T)])  # (T, J, G, G)
    left, right = st.columns([1, 3])
    show(
        left,
        picture(to_image, image, width=168),
        t("input (label {label}), prediction {prediction}", label=plain(label), prediction=plain(names[winner])),
        168,
    )
    show(
        left,
        picture(overlay, image, maps[winner], width=168),
        t("coupling to {name} at iteration {k}, over the input", name=plain(names[winner]), k=it + 1),
        168,
    )
    left.download_button(
        t("This iteration (PNG)"),
        lambda: png_bytes(coupling_frames(every, image, names, only=it, capsule=words.capsule)[0]),
        f"couplings-iteration{it + 1}.png",
        "image/png",
        key="coupling_png",
        on_click="ignore",
        help=t("The 10 coupling maps over the input, for slides"),
    )
    left.download_button(
        t("Every iteration (GIF)"),
        lambda: gif_bytes(coupling_frames(every, image, names, capsule=words.capsule)),
        "couplings.gif",
        "image/gif",
        key="coupling_gif",
        on_click="ignore",
        help=t("The coupling maps iteration by iteration, one colour scale throughout, as an animated GIF"),
    )
    maps_place, caption_place = right.empty(), right.empty()  # filled once the detailed map's capsule is chosen
    with right:
        link_choice(STATE.capsule_index, range(len(names)), winner, words.capsule, label=lambda k: plain(names[k]))
    j = right.selectbox(
        t("{Capsule} for the detailed map", Capsule=words.capsule[:1].upper() + words.capsule[1:]),
        list(range(len(names))),
        index=winner,
        format_func=lambda k: plain(names[k]),
        key=STATE.capsule_index.key,
        bind="query-params",
        help=t("Which {capsule} the map below and the GIF show", capsule=words.capsule),
    )
    title, caption = map_words(tr, it, words.capsule, words.thing, words.digits, j, plain(names[j]))
    maps_place.plotly_chart(chart(class_maps, maps, names, title, zrange=zrange if even else None), key="coupling_maps")
    caption_place.caption(caption)  # plain: numbers and the class words only, the class name made plain
    detail_title, detail_caption = detail_words(tr, it, j, plain(names[j]))
    right.plotly_chart(
        chart(
            heatmap,
            tr.by_capsule(tr.c[it, :, j]),
            detail_title,
            *capsule_axes(tr),
            height=300,
            **capsule_labels(tr),
            **(dict(zmin=zrange[0], zmax=zrange[1]) if even else {}),
        ),
        key="coupling_types",
    )
    right.caption(detail_caption)  # plain: numbers and the class name made plain


couplings_view(tr, image, label, winner)

a, b = st.columns(2)
a.plotly_chart(
    chart(lines, tr.lengths, names, t("Lengths by iteration"), t("iteration"), t("length |v_j| (presence)")), key="lengths_by_iteration"
)
a.caption(length_words(tr.lengths, winner, words.capsule, words.thing, plain(names[winner])))  # plain: its one name is made plain here
ent = entropy_figure(tr, words.capsule, words.thing)
b.plotly_chart(
    chart(lines, ent["series"], ent["names"], ent["title"], t("iteration"), ent["axis"], y_range=ent["y_range"], line=ent["line"]),
    key="entropy",
)
b.caption(ent["caption"])  # plain: numbers and the class words only

if tr.layout.grid:
    c, d = st.columns([1, 2])
    show(
        c,
        picture(overlay, image, np.maximum(tr.agreement_map(winner), 0), width=224),
        t(
            "where predictions agree with the {name} capsule (agreement u_hat . v above 0, summed over the primary capsules at "
            "each position)",
            name=plain(names[winner]),
        ),
        224,
    )
    d.plotly_chart(
        chart(
            heatmap,
            tr.by_capsule(tr.agreement[:, winner]),
            t("Agreement u_hat . v with {name}", name=names[winner]),
            *capsule_axes(tr),
            height=300,
            **capsule_labels(tr),
        ),
        key="agreement",
    )
    d.caption(
        t(
            "Each primary capsule's agreement with the {name} capsule after iteration {T}, laid out as the detailed coupling map "
            "above: what routing adds to b at each iteration.",
            name=plain(names[winner]),
            T=T,
        )
    )
else:
    st.plotly_chart(
        chart(heatmap, tr.agreement.T, t("Agreement u_hat . v"), t("primary capsule"), t("class"), y=[str(n) for n in names], height=300),
        key="agreement",
    )
    st.caption(
        t(
            "Each primary capsule's agreement with each {capsule} after iteration {T}, a column per primary capsule as in the "
            "couplings above: what routing adds to b at each iteration.",
            capsule=words.capsule,
            T=T,
        )
    )

st.subheader(t("Appendix A: how fast routing converges"))
own_images = user_dataset(meta.image_dataset) is not None
data = (
    test_set(meta.image_dataset, meta.config.in_size, meta.config.in_channels, quiet=True)
    if meta.config.in_size - 2 * pad == 28 or own_images
    else None
)


@st.cache_data(show_spinner=t("Routing 64 test images ..."))
def batch_change(model_key: str, _model, dataset: str, _data, T: int):  # _data: the test set of `dataset`
    return mean_b_change(_model, centred_batch(as_input_batch(_data.images[:64]), pad), T, routing)


series = [full.b_change, np.concatenate([[np.nan], full.c_change])]
labels = [t("mean |delta b|, this image"), t("mean |delta c|, this image")]
if data is not None:
    series.append(batch_change(STATE.model_key.get(), model, meta.image_dataset, data, Tmax))
    labels.append(t("mean |delta b|, 64 test images"))
st.plotly_chart(
    chart(
        lines,
        np.clip(np.stack(series, 1), 1e-12, None),
        labels,
        t("Change per iteration (log scale)"),
        t("iteration"),
        t("mean absolute change"),
        log_y=True,
        legend_below=True,
    ),
    key="b_change",
)
st.caption(convergence_words(full.b_change, full.c_change))

if data is not None:
    st.subheader(t("How far routing moves from uniform, over 64 test images"))

    @st.cache_data(show_spinner=t("Routing 64 test images ..."))
    def summary(model_key: str, _model, dataset: str, _data, T: int):  # _data: the test set of `dataset`
        return coupling_summary(_model, centred_batch(as_input_batch(_data.images[:64]), pad), T, routing)

    cs = summary(STATE.model_key.get(), model, meta.image_dataset, data, Tmax)
    k = T - 1  # the iteration count chosen above
    st.plotly_chart(
        chart(
            lines,
            np.stack([cs["coupling_to_prediction"], cs["vote_weighted_coupling_to_prediction"], np.full(Tmax, cs["uniform"])], 1),
            [
                t("mean coupling to the predicted class"),
                t("the same, weighted by vote length |u_hat|"),
                t("uniform (1/I)") if cs["softmax"] == "inputs" else t("uniform (1/J)"),
            ],
            t("Coupling to the predicted class, by iteration"),
            t("iteration"),
            t("coupling"),
            legend_below=True,
        ),
        key="coupling_summary",
    )
    st.caption(summary_words(cs, k, trained_with_words(meta.config)))

st.subheader(t("Same weights, 1 to 10 iterations"))


sweep = kept(sweep_of_trace, model, full, key=(STATE.model_key.get(), image, Tmax))  # from the run above: no second routing
e, f = st.columns([2, 3])
e.plotly_chart(
    chart(lines, sweep["lengths"], names, t("Lengths by iteration count"), t("routing iterations"), "|v_j|"), key="sweep_lengths"
)
e.caption(
    dynamic_sweep_words(sweep["lengths"], sweep["predictions"], T, [plain(n) for n in names], words.capsule)
)  # plain: names made plain here
recs = [r for r in sweep["reconstructions"] if r is not None]
if recs:
    show(
        f,
        [picture(to_image, r, 3) for r in recs],
        [t("{k} it.: {name}", k=k + 1, name=plain(names[p])) for k, p in enumerate(sweep["predictions"])],
        84,
    )

site_button("routing", meta)
