"""MultiMNIST: overlapping digits classified and segmented (Fig. 5 of Sabour et al. 2017)."""

import numpy as np
import streamlit as st

from capsviz.analysis.explain import (
    capsule_role,
    pair_routing,
    pair_routing_title,
    pair_routing_words,
    pair_words,
    reconstruction_words,
    round_up,
)
from capsviz.analysis.links import linked_numbers
from capsviz.analysis.multimnist import (
    SEGMENT_LEGEND,
    SEGMENT_NAMES,
    compose_pair,
    draw_pair,
    intro_words,
    pair_accuracy,
    segment,
    segment_words,
    stored_pair_error,
    stored_words,
)
from capsviz.analysis.questions import both_digits
from capsviz.data.multimnist import MAX_SHIFT, SIZE  # the canvas its models read
from capsviz.i18n import keeping, t
from capsviz.registry import routing_words
from capsviz.text import plain
from capsviz.viz import SEGMENT_COLOURS, capsule_bars, png_bytes, segments_image, to_image, two_colour
from capsviz.viz.explain import coupling_block, coupling_overlays, coupling_scale_words
from pages.active import for_image, page_model, test_set
from pages.asking import ask
from pages.common import require_router
from pages.drawn import chart, picture, show
from pages.inputs import count_slider, long_job
from pages.linking import keep_link_note, link_choice, show_link_note
from pages.state import STATE, link_asks
from pages.terms import term_help, uses

require_router()
uses("multimnist", "segmentation", "reconstruction", "pose")  # the glossary entries its text names (pages.terms)

st.title(t("MultiMNIST: two digits on top of each other"))
st.markdown(intro_words(SIZE, MAX_SHIFT))

model, meta, path = page_model(
    lambda m: m.config.decodes and m.config.in_size == SIZE,
    t("a CapsNet trained on MultiMNIST (pairs of digits, {size}x{size})", size=SIZE),
    t(
        "**{{name}}** is not a CapsNet trained on MultiMNIST ({size}x{size} inputs with a decoder). None is in the model folder; "
        "train one: `python -m capsviz train --model capsnet-small --dataset multimnist --out "
        "checkpoints/capsnet-small-multimnist.safetensors`.",
        size=SIZE,
    ),
)
data = test_set("multimnist")
if data is None:
    st.stop()
N = len(data)
qp = st.query_params
KEYS = [STATE.pair(part=p) for p in ("i1", "i2", "dy1", "dx1", "dy2", "dx2")]


def spec(first: int, second: int, shifts) -> list[int]:
    return [first, second, *shifts[0], *shifts[1]]


if not KEYS[0].present and STATE.pair_saved.present:  # back from another page
    STATE.pair_pending.set(STATE.pair_saved.get())
elif not KEYS[0].present:  # a shared link's pair once (brought within range), else the first pair the paper's rule draws
    first = spec(*draw_pair(data.labels, seed=0))
    raw = link_asks("pair")
    parts = [(0, N - 1, t("first digit")), (0, N - 1, t("second digit"))] + [
        (-MAX_SHIFT, MAX_SHIFT, s) for s in ("dy 1", "dx 1", "dy 2", "dx 2")
    ]
    STATE.pair_pending.set(first if raw is None else list(keep_link_note("pair", linked_numbers(raw, parts, first)).value))
if STATE.pair_pending.present:  # seed the widgets before they are drawn
    for k, v in zip(KEYS, STATE.pair_pending.pop(), strict=True):
        k.set(v)

with st.container(border=True):
    c = st.columns([1.2, 1, 1, 0.8, 0.8, 0.8, 0.8])
    if c[0].button(t("Random pair"), key="random_pair", help=t("Two test digits of different classes, shifts drawn as in the paper")):
        STATE.pair_pending.set(spec(*draw_pair(data.labels, seed=int(np.random.randint(1 << 30)))))
        st.rerun()
    c[1].number_input(t("First digit (test index)"), 0, N - 1, key=KEYS[0].key)
    c[2].number_input(t("Second digit (test index)"), 0, N - 1, key=KEYS[1].key)
    for j, label in enumerate(["dy 1", "dx 1", "dy 2", "dx 2"]):
        c[3 + j].number_input(
            plain(label),
            -MAX_SHIFT,
            MAX_SHIFT,
            key=KEYS[2 + j].key,
            help=t("shift in pixels (down, right), at most {max_shift} as in the paper", max_shift=MAX_SHIFT),
        )

vals = [int(k.get()) for k in KEYS]
STATE.pair_saved.set(vals)  # widget state is dropped while another page shows
qp["pair"] = ",".join(map(str, vals))
show_link_note("pair", tuple(vals))
pair = compose_pair(data.images, data.labels, vals[0], vals[1], [vals[2:4], vals[4:6]])
l1, l2 = pair.labels
if l1 == l2:
    st.warning(
        t(
            "Both digits are {digit}s. The paper only pairs digits of different classes; the two-capsule rule cannot be right here.",
            digit=l1,
        )
    )


pair_image = pair.image.astype(np.float32)
seg = for_image(segment, model, pair_image, None)
t1, t2 = seg.top2
names = [str(k) for k in range(10)]
default = [t1, t2]
if (raw := link_asks("caps")) is not None:  # a shared link's capsule choice, once (brought within range)
    default = list(keep_link_note("caps", linked_numbers(raw, [(0, 9, t("red capsule")), (0, 9, t("green capsule"))], default)).value)


def mark(j: int) -> str:
    return t("{j} ({role})", j=j, role=capsule_role(j, (l1, l2), (t1, t2)))


# predict, then see: the lengths and everything drawn from them wait for the student's answer
if not ask(both_digits(STATE.model_key.get(), pair_image, (t1, t2), (l1, l2))):
    show(
        st, picture(to_image, pair.image, 6, width=216), t("input: {labels}", labels=pair_words(l1, l2)), 216
    )  # the labels: the question is whether the model finds both
    st.stop()
left, right = st.columns([1, 2])
with left:
    show(st, picture(to_image, pair.image, 6, width=216), t("input: {labels}", labels=pair_words(l1, l2)), 216)
with right:
    st.plotly_chart(
        chart(capsule_bars, seg.scores, names, (t1, t2), t("Prediction: {first} and {second} (two longest capsules)", first=t1, second=t2)),
        key="mm_lengths",
    )

st.subheader(t("Reconstruct one capsule at a time"))
pick = st.columns(2)
red = pick[0].selectbox(
    t("Red: reconstruct capsule"),
    range(10),
    index=default[0],
    format_func=keeping(mark),
    key=f"red_{vals}_{path.stem}",
    help=term_help("reconstruction"),
)
green = pick[1].selectbox(
    t("Green: reconstruct capsule"),
    range(10),
    index=default[1],
    format_func=keeping(mark),
    key=f"green_{vals}_{path.stem}",
    help=term_help("reconstruction"),
)
qp["caps"] = f"{red},{green}"
show_link_note("caps", (red, green))
chosen = for_image(segment, model, pair_image, (red, green)) if (red, green) != seg.capsules else seg
r1, r2 = chosen.reconstructions
cols = st.columns(4)
show(
    cols[0],
    picture(two_colour, pair.image, r1, r2, width=216),
    t(
        "{reconstructions}; over the input with {labels}",
        reconstructions=reconstruction_words(red, green, (l1, l2), (t1, t2)),
        labels=pair_words(l1, l2),
    ),
    216,
)
show(cols[1], picture(to_image, r1, width=216), t("red: capsule {capsule} alone", capsule=mark(red)), 216)
show(cols[2], picture(to_image, r2, width=216), t("green: capsule {capsule} alone", capsule=mark(green)), 216)
show(cols[3], picture(segments_image, chosen.segments, width=216), t("segmentation of the input's ink"), 216)
counts = {SEGMENT_NAMES[k]: int((chosen.segments == k).sum()) for k in range(1, 5)}
legend = " · ".join(
    f"<span style='color:rgb{tuple(int(v) for v in SEGMENT_COLOURS[k])}'>■</span> "
    + t("{name}: {count} px", name=t(SEGMENT_LEGEND[k], first=red, second=green), count=counts[name])
    for k, name in SEGMENT_NAMES.items()
    if k
)
st.markdown(legend, unsafe_allow_html=True)
st.caption(segment_words(chosen.segments, mark(red), mark(green), pair.parts))

st.subheader(t("Where routing matters: the pair beside one digit alone"))
st.markdown(
    t(
        "Sabour et al. credit routing with explaining overlapping digits away: each primary capsule should send its prediction "
        "to the digit capsule it agrees with. Below, the couplings c (the share of each primary capsule's prediction sent to a "
        "digit capsule) to the pair's two winners, capsules {first} and {second}, at every routing iteration, laid over the "
        "input; and the same for one of the two digits alone, at the same place on the canvas.",
        first=t1,
        second=t2,
    )
)
if meta.config.couplings != "dynamic":
    st.info(
        t(
            "**{model}** was trained with {routing}, not with dynamic routing: the prediction above uses those. This section runs "
            "its capsules with dynamic routing ({T} iterations) instead, on weights that training made for the other couplings. "
            "The Routing lab compares the two over the test pairs.",
            model=plain(path.stem),
            routing=routing_words(meta.config.couplings),
            T=meta.config.routing_iterations,
        ),
        icon=":material/info:",
    )


@st.cache_data(max_entries=32, show_spinner=False)
def routing_of(model_key: str, _model, pair_bytes: bytes, single_bytes: bytes, shape: tuple, capsules: tuple[int, int], T: int):
    as_image = lambda b: np.frombuffer(b, np.float32).reshape(shape)  # noqa: E731 - two inputs, one shape
    return pair_routing(_model, as_image(pair_bytes), as_image(single_bytes), capsules, T)


@st.fragment
def routing_view(pair, vals: list[int], t1: int, t2: int) -> None:
    """The digit routed alone reruns only this section (the pair's other figures stay)."""
    link_choice(STATE.mm_alone, STATE.mm_alone.choices, STATE.mm_alone.default, t("digit routed alone"))
    alone = st.radio(
        t("Digit routed alone"),
        ["first digit", "second digit"],  # plain options: the URL keeps the word, which fits any pair
        format_func=keeping(t),  # the options' words in the reader's language; the URL keeps the English
        horizontal=True,
        key=STATE.mm_alone.key,
        bind="query-params",
        help=t("Which of the pair's two digits to route on its own, shifted as in the pair"),
    )
    alone = 0 if alone == "first digit" else 1
    st.caption(t("The first digit is a {first}, the second a {second}.", first=plain(pair.labels[0]), second=plain(pair.labels[1])))
    T_route = meta.config.routing_iterations

    single = pair.parts[alone].astype(np.float32)
    routed = routing_of(STATE.model_key.get(), model, pair_image.tobytes(), single.tobytes(), pair_image.shape, (t1, t2), T_route)
    single_name = t("the {digit}", digit=plain(pair.labels[alone]))
    high = max(round_up(float(routed.maps.max())), routed.uniform + 0.001)  # one scale for every map: they compare
    maps = routed.maps.transpose(0, 2, 1, 3, 4)  # (2 inputs, 2 capsules, T, G, G)
    inputs, groups = (
        [pair.image, single],
        [t("the pair ({labels})", labels=pair_words(*pair.labels)), t("{digit} alone", digit=single_name)],
    )
    rows = [t("coupling c\nto capsule {capsule}", capsule=t1), t("coupling c\nto capsule {capsule}", capsule=t2)]
    title = pair_routing_title((t1, t2), meta.config)
    st.markdown(f"**{title}**")  # plain: numbers only
    for col, image, group, block in zip(
        st.container(key="mm_couplings").columns(2), inputs, groups, maps, strict=True
    ):  # stacked on a phone
        show(col, picture(coupling_block, image, block, group, rows, routed.uniform, high))
    st.caption(coupling_scale_words(routed.uniform, high, maps.shape[-1]))
    st.download_button(
        t("Download this figure (PNG)"),
        lambda: png_bytes(coupling_overlays(inputs, maps, groups, rows, routed.uniform, high, title)),
        f"{path.stem}-pair-{'-'.join(map(str, vals))}-couplings.png",
        "image/png",
        key="mm_couplings_png",
        on_click="ignore",
    )
    st.info(pair_routing_words(routed, single_name))  # plain: its one name is made plain above


routing_view(pair, vals, t1, t2)

st.subheader(t("Accuracy on generated test pairs"))
st.caption(
    t(
        "The paper's rule: a pair is right when its two labels are the two longest capsules. Pairs come from the fixed "
        "evaluation set (each test digit paired once with a digit of another class, seeded)."
    )
)
n = count_slider(t("Pairs"), [100, 500, 1000, 2000, 5000, 10000], 1000, N, STATE.pairs_measured)
res = long_job(
    f"{STATE.model_key.get()}:{n}",
    t("Measure accuracy"),
    lambda progress: pair_accuracy(model, data.images, data.labels, n, on_progress=progress),
)
if res is not None:
    st.metric(t("Pair error"), f"{res.error:.2f}%", help=term_help("pair_error"))
    st.caption(res.words())
    st.caption(stored_words(res, stored_pair_error(meta)))
    st.markdown(t("**The hardest pairs** (wrong ones first, then those where the second digit's capsule was least sure):"))
    gallery = st.columns(len(res.hardest))
    for col, h in zip(gallery, res.hardest, strict=True):
        p = compose_pair(data.images, data.labels, h["index"][0], h["index"][1], h["shifts"])
        said = dict(labels=plain(pair_words(*h["labels"])), first=h["top2"][0], second=h["top2"][1])
        show(
            col,
            picture(to_image, p.image, 3),
            (
                t("{labels}, predicted {first} and {second}", **said)
                if h["correct"]
                else t("{labels}, predicted {first} and {second} (wrong)", **said)
            ),
        )
        if col.button(t("Open"), key=f"open_{h['index'][0]}_{h['index'][1]}"):
            STATE.pair_pending.set(spec(h["index"][0], h["index"][1], h["shifts"]))
            st.rerun()
