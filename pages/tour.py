"""The guided tour: one image followed through the active capsule network, one step at a time
(Back / Next, the step in the URL as ?step=N). Dynamic-routing CapsNets, matrix capsules and
Efficient-CapsNet (self-attention routing, one pass)."""

import numpy as np
import streamlit as st

from capsviz.analysis import lab, rules
from capsviz.analysis.tour import TOURS
from capsviz.glossary import class_words, help_text, label
from capsviz.models.efficient_capsnet import MSE_WEIGHT
from capsviz.routing import ROUTINGS
from capsviz.text import plain
from capsviz.viz import grouped_bars, png_bytes
from capsviz.viz.animation import gif_bytes, tour_em_frames, tour_routing_frames, tour_vote_frame
from capsviz.viz.teach import bars, capsule_arrows, feature_maps, markdown_table, side_by_side, value_grid
from pages.common import link_number, page_model, pick_image, plain_chart, require_router, said_rows, show_link_note, site_button

require_router()
st.title("A guided tour of a capsule network")
st.markdown(
    "Follow one image through the active model, one step at a time, with the real numbers at every step. "
    "Each step says which equation or figure of the paper it shows; hover a ? for the words behind a symbol. "
    "New to capsules? The **Routing playgrounds** show the same mechanism on six capsules you can move."
)
st.page_link("pages/glossary.py", label="Glossary: every symbol and word, in one place", icon=":material/menu_book:")

model, meta, path = page_model(
    lambda meta: meta.config.routing in TOURS,
    "a capsule network to follow an image through",
    "**{name}** is {family}, which has no capsules to follow. Pick a capsule network in the sidebar.",
)
routing = meta.config.routing
names = [str(n) for n in meta.class_names]
words = class_words(meta)  # digit capsules for digits; class capsules for Fashion-MNIST and a user's own images
size = meta.config.in_size
looks = f"the {size}x{size} input, " + ("red, green and blue levels 0 to 1" if meta.config.in_channels == 3 else "grey levels 0 to 1")
with st.expander("The image to follow (a test image, a drawing or an upload: change it here)", expanded=False):
    picked = pick_image(meta.image_dataset, names, meta.config.in_size, model)
if picked is None:
    st.stop()
image, truth = picked


@st.cache_data(max_entries=16, show_spinner="Following the image through the network ...")
def follow(model_key: str, _model, image_bytes: bytes, shape: tuple, routing: str):  # _model: the one model_key names
    return TOURS[routing].follow(_model, np.frombuffer(image_bytes, np.float32).reshape(shape))


tour = follow(st.session_state["model_key"], model, image.tobytes(), image.shape, routing)
steps = TOURS[routing].steps(tour.iterations, words)
N = len(steps)

linked_step = link_number("step", 1, N, 1, "step")  # a shared link's step, once
if linked_step is not None or "tour_step" not in st.session_state:
    st.session_state["tour_step"] = linked_step or 1
st.session_state["tour_step"] = min(max(st.session_state["tour_step"], 1), N)  # the other family's tour may be longer


def move(by: int) -> None:
    st.session_state["tour_step"] = min(max(st.session_state["tour_step"] + by, 1), N)


k = st.session_state["tour_step"]
st.query_params["step"] = str(k)
back, where, nxt = st.columns([1, 4, 1], vertical_alignment="center")
back.button(
    "Back",
    key="tour_back",
    on_click=move,
    args=(-1,),
    disabled=k == 1,
    width="stretch",
    icon=":material/arrow_back:",
    shortcut="Left",
    help="Previous step (left arrow key)",
)
nxt.button(
    "Next",
    key="tour_next",
    on_click=move,
    args=(1,),
    disabled=k == N,
    width="stretch",
    type="primary",
    icon=":material/arrow_forward:",
    shortcut="Right",
    help="Next step (right arrow key)",
)
where.progress(k / N, text=f"Step {k} of {N}: **{steps[k - 1].title}**")  # plain: the tour's own step titles
show_link_note("step", k)
step = steps[k - 1].key
W, R = tour.winner, tour.runner_up


def show(img, caption: str, name: str, width: int | None = None) -> None:
    """One figure, its caption, and its PNG for slides."""
    st.image(img, caption=plain(caption), width=width or "stretch")
    st.download_button("Download this figure (PNG)", png_bytes(img), f"tour-{name}.png", "image/png", key="tour_png", on_click="ignore")


def share(x: np.ndarray) -> str:
    """'0.14 to 0.23', or '1.00 each' when they are all the same."""
    lo, hi = f"{x.min():.2f}", f"{x.max():.2f}"
    return f"{lo} each" if lo == hi else f"{lo} to {hi}"


def say(*sentences: str) -> None:
    st.markdown(" ".join(sentences))


def numbers(rows: dict, *terms: str) -> None:
    """A few real numbers as a plain table (three decimals), with what its symbols mean below."""
    st.markdown(markdown_table(rows))
    st.caption(help_text(*terms))


fig, text = st.columns([3, 2], gap="large")
if routing == "dynamic":
    T = tour.iterations
    if step == "input":
        with fig:
            show(side_by_side([image], [f"label: {truth}"]), looks, "input", width=260)
        with text:
            say(
                f"This is the image the tour follows through **{plain(path.stem)}**, a CapsNet with dynamic routing "
                "(Sabour et al. 2017, Fig. 1). It will pass three layers: an ordinary convolution, a layer of primary capsules "
                f"and one {words.capsule} per class, with routing by agreement between the two capsule layers.",
                "A capsule outputs a vector, not a number: its length says how likely its thing is present, its direction how it looks.",
            )
    elif step == "conv1":
        with fig:
            show(
                feature_maps(tour.conv1, [f"filter {i}" for i in tour.conv1_ids]),
                "bright = the filter responds there (each map scaled to its own maximum)",
                "conv1",
            )
        with text:
            say(
                f"{label('conv1')} slides {tour.conv1_total} filters of 9x9 pixels over the image and keeps the positive responses (ReLU).",
                f"Here the {len(tour.conv1_ids)} maps that respond most: local features such as edges and stroke ends.",
                "These are still ordinary neurons, one number per place: *whether* a feature is there, not yet *how* it sits.",
            )
    elif step == "primary":
        G, K = tour.grid, tour.types
        top = np.unravel_index(tour.primary_len.argmax(), tour.primary_len.shape)
        with fig:
            show(
                capsule_arrows(image, tour.arrow_len, tour.arrow_dir),
                f"at each of the {G}x{G} positions, the longest of its {K} capsules: arrow length = its length (presence), arrow direction = its pose",
                "primary",
            )
        with text:
            say(
                f"{label('primary')}: a second convolution whose outputs are grouped into {tour.primary_len.size} capsules of 8 numbers, "
                f"{K} types at each of {G}x{G} positions. Each vector is squashed (Eq. 1) so its length lies between 0 and 1.",
                "In the paper, **length = presence** (how sure the capsule is that its part is there) and **direction = pose** "
                "(8 numbers for how the part looks; the arrows show them along the two directions in which this image's vectors differ most).",
            )
            long = float((tour.primary_len > 0.9).mean())
            if long > 0.5:  # the trained paper CapsNet: nearly every primary capsule is saturated, on ink or not
                st.warning(
                    f"Measured here: {long:.0%} of the {tour.primary_len.size} primary capsules are longer than 0.9 "
                    f"(lengths {tour.primary_len.min():.2f} to {tour.primary_len.max():.2f}), "
                    + (
                        "over the blank background as much as on the ink. "
                        if words.digits
                        else "over the background as much as on the object. "
                    )
                    + f"In this trained model a primary capsule's length does not show where the {plain(words.shown)} is; what differs between them is their "
                    "direction, and so the predictions they make (next step)."
                )
            else:
                st.info(
                    f"Measured here: the longest is type {top[2] + 1} at row {top[0] + 1}, col {top[1] + 1} (length {tour.primary_len[top]:.2f}); "
                    f"{long:.0%} of the primary capsules are longer than 0.9."
                )
            st.caption(help_text("length", "pose"))
    elif step == "predictions":
        with fig:
            show(
                value_grid(
                    tour.pred_len,
                    tour.shown_names,
                    names,
                    f"Length of the predictions u_hat_j|i for each {words.capsule} j (red: {names[W]})",
                    W,
                ),
                f"rows: the six primary capsules with the longest predictions for {names[W]}; columns: the {words.capsules}",
                "predictions",
            )
        with text:
            say(
                f"Each primary capsule multiplies its vector by a learned matrix {label('W')} once per {words.capsule}: "
                f"{tour.c.shape[1]} x {len(names)} predictions {label('u_hat')} (Eq. 2), each a 16-number guess of what {words.thing} j's capsule should be:",
                f"'if I am this {'piece of stroke' if words.digits else 'part'}, {'an' if str(names[W])[:1].lower() in tuple('aeiou') else 'a'} {plain(names[W])} would sit here and look like this'.",
                f"A long prediction is a confident one; the table shows that one capsule can predict several {words.things} loudly.",
                f"Routing now decides how much of each prediction reaches each {words.capsule}: predictions that agree with each other should win.",
            )
            st.caption(help_text("u_hat", "W"))
    elif step.startswith("iteration"):
        t = int(step.removeprefix("iteration")) - 1
        with fig:
            show(
                tour_routing_frames(tour, names, only=t, capsule=words.capsule)[0],
                f"each {words.capsule}'s plane: x along its final output v, so a prediction's x is its agreement with v (up to |v|)",
                f"routing-{t + 1}",
            )
            st.download_button(
                "Download every iteration (animated GIF)",
                lambda: gif_bytes(tour_routing_frames(tour, names, capsule=words.capsule)),
                "tour-routing.gif",
                "image/gif",
                key="tour_gif",
                on_click="ignore",
            )
        mean, weighted = tour.mean_coupling(t, W), tour.weighted_coupling(t, W)
        shown_c = tour.c[t][tour.shown, W]
        with text:
            if t == 0:
                say(
                    f"Procedure 1 of the paper, iteration 1: every {label('b')} starts at 0, so every {label('c')} is 1/{len(names)} = {1 / len(names):.2f}: each capsule splits its prediction equally."
                )
            else:
                say(
                    f"Iteration {t + 1}: each {label('b')} has grown by the {label('agreement')} of the iteration before, and c = softmax(b) (Eq. 3) follows."
                )
            say(
                f"Each {words.capsule} sums the weighted predictions, {label('s')} (Eq. 2), and squashes it to {label('v')} (Eq. 1): "
                f"|s_{plain(names[W])}| = {np.linalg.norm(tour.s[t, W]):.2f} squashes to |v_{plain(names[W])}| = {np.linalg.norm(tour.v[t, W]):.2f}; "
                f"|s_{plain(names[R])}| = {np.linalg.norm(tour.s[t, R]):.2f} to |v_{plain(names[R])}| = {np.linalg.norm(tour.v[t, R]):.2f}.",
            )
            st.info(
                f"Measured here: the six loudest predictions for {plain(names[W])} are coupled to it by {plain(share(shown_c))}; "
                f"averaged over all {tour.c.shape[1]} primary capsules the coupling to {plain(names[W])} is {mean:.3f} (uniform {1 / len(names):.3f}), "
                f"{weighted:.3f} weighted by prediction length. "
                + (
                    "Most capsules' couplings stay near uniform in this trained model: routing moves mainly the capsules with long predictions."
                    if t > 0 and mean < 0.15
                    else ""
                )
            )
        rows = {"primary capsule": tour.shown_names}
        for j in (W, R):
            rows[f"b to {plain(names[j])}"] = tour.b[t][tour.shown, j]
            rows[f"c to {plain(names[j])}"] = tour.c[t][tour.shown, j]
        numbers(rows, "b", "c")
    elif step == "lengths":
        with fig:
            show(
                bars(
                    tour.lengths,
                    names,
                    W,
                    f"{'DigitCaps' if words.digits else 'Class capsule'} lengths |v_j| after routing",
                    "length",
                    {"0.9": 0.9, "0.1": 0.1},
                ),
                "dotted: the margin loss's targets",
                "lengths",
            )
        with text:
            say(
                f"The answer is the longest {words.capsule}: **{plain(names[W])}** with length {tour.lengths[W]:.2f} (label: {plain(truth)}); the runner-up, {plain(names[R])}, has {tour.lengths[R]:.2f}.",
                f"Training used the {label('margin_loss')}: the right capsule longer than 0.9, every other shorter than 0.1 (Eq. 4).",
                "Several capsules can be long at once: that is how the network reads two overlapping digits (the MultiMNIST page).",
            )
            st.caption(help_text("margin_loss", "length"))
    elif step == "reconstruction":
        with fig:
            if tour.reconstruction is None:
                st.info("This CapsNet was trained without a decoder, so there is nothing to redraw.")
            else:
                show(
                    side_by_side([image, tour.reconstruction], ["input", f"redrawn from capsule {names[W]}"]),
                    "the decoder sees only the winning capsule's 16 numbers",
                    "reconstruction",
                )
        with text:
            say(
                f"The {label('reconstruction')} decoder (three fully connected layers, Fig. 2) redraws the {words.shown} from the 16 numbers of capsule {plain(names[W])} alone, the others masked to 0.",
                f"During training this keeps the capsule's direction meaningful: its 16 numbers must say how the {words.shown} looks.",
                "The **DigitCaps explorer** lets you nudge each of the 16 numbers and watch "
                + ("stroke width, slant and shape change (Fig. 4)." if words.digits else "the drawing change."),
            )
elif routing == "self-attention":
    I, J = tour.c.shape
    D = tour.v.shape[-1]
    K = tour.u.shape[-1]
    caps = [f"capsule {i + 1}" for i in range(I)]
    uniform = 1 / J
    if step == "input":
        with fig:
            show(side_by_side([image], [f"label: {truth}"]), looks, "input", width=260)
        with text:
            say(
                f"This is the image the tour follows through **{plain(path.stem)}**, an Efficient-CapsNet "
                "(Mazzia, Salvetti, Chiaberge 2021). It will pass four convolutions, a layer of "
                f"{I} primary capsules and one class capsule per class, with self-attention routing between the two capsule layers: "
                "one pass, no iterations.",
                f"The model has {tour.parameters:,} parameters without its decoder.",
                "A capsule outputs a vector, not a number: its length says how likely its thing is present, its direction how it looks.",
            )
    elif step == "convs":
        last_c, last_side = tour.sizes[-1]
        with fig:
            show(
                feature_maps(tour.maps, [f"map {i}" for i in tour.map_ids], scale=8),
                "bright = the filter responds there (each map scaled to its own maximum)",
                "convs",
            )
        with text:
            chain = " -> ".join([f"{image.shape[0]}x{image.shape[1]}"] + [f"{side}x{side}x{ch}" for ch, side in tour.sizes])
            say(
                f"Four convolutions (5x5, then three of 3x3, the last moving 2 pixels at a time), each followed by ReLU and BatchNorm: {chain}.",
                f"Here the {len(tour.map_ids)} of the last convolution's {last_c} maps ({last_side}x{last_side}) that respond most on average, "
                "after its ReLU and before its BatchNorm (which only rescales and shifts each map as a whole).",
                "These are still ordinary neurons, one number per place: *whether* a feature is there, not yet *how* it sits.",
            )
    elif step == "primary":
        C = tour.s_primary.size
        size = np.linalg.norm(tour.s_primary, axis=-1)  # |s| before the squash
        L = tour.primary_len
        hi, lo = int(L.argmax()), int(L.argmin())
        with fig:
            show(
                bars(L, [str(i + 1) for i in range(I)], hi, f"Lengths of the {I} primary capsules (presence)", "length"),
                f"one bar per primary capsule; red: the longest, capsule {hi + 1}",
                "primary",
            )
        with text:
            say(
                f"{label('primary')}: a *depthwise* convolution, one {tour.grid}x{tour.grid} filter per channel, as large as the whole "
                f"{tour.grid}x{tour.grid} map: each of the {C} channels becomes one number, a weighted sum of its whole map.",
                f"Those {C} numbers are grouped into {I} capsules of {K}. There is no grid of positions: every capsule sees the whole image.",
            )
            say(
                f"Efficient-CapsNet's own squash, v = (1 - 1/e^|s|) s / |s|, keeps each vector's direction and sets its length to 1 - e^-|s|: "
                f"capsule {hi + 1} has |s| = {size[hi]:.2f}, so length {L[hi]:.2f}; capsule {lo + 1} has |s| = {size[lo]:.2f}, so length {L[lo]:.2f}. "
                f"(Eq. 1 of Sabour et al. would give {size[hi] ** 2 / (1 + size[hi] ** 2):.2f} and {size[lo] ** 2 / (1 + size[lo] ** 2):.2f}.)",
            )
            st.info(
                f"Measured here: primary capsule lengths {L.min():.2f} to {L.max():.2f}; {int((L > 0.9).sum())} of {I} are longer than 0.9."
            )
            st.caption(help_text("efficient_squash", "length", "pose"))
    elif step == "predictions":
        top = int(tour.pred_len[:, W].argmax())
        with fig:
            show(
                value_grid(
                    tour.pred_len, caps, names, f"Length of the predictions u_hat_j|i for each class capsule j (red: {names[W]})", W
                ),
                f"rows: all {I} primary capsules; columns: the class capsules",
                "predictions",
            )
        with text:
            say(
                f"Each primary capsule multiplies its {K} numbers by a learned {K}x{D} matrix {label('W')} once per class capsule: "
                f"{I} x {J} predictions {label('u_hat')}, each {D} numbers for what class j's capsule should be.",
                "A long prediction is a loud one; routing now decides how much of each prediction reaches each class capsule.",
            )
            st.info(
                f"Measured here: the longest prediction for {plain(names[W])} is capsule {top + 1}'s ({tour.pred_len[top, W]:.2f}); "
                f"the predictions for {plain(names[W])} run from {tour.pred_len[:, W].min():.2f} to {tour.pred_len[:, W].max():.2f}."
            )
            st.caption(help_text("u_hat", "W"))
    elif step == "routing":
        near = tour.entropy > rules.NEAR_UNIFORM_ENTROPY
        decided = tour.decided()
        with fig:
            show(
                value_grid(tour.c, caps, names, f"Couplings c_ij after self-attention (uniform: {uniform:.2f}; red: {names[W]})", W),
                "each row: one primary capsule's couplings, adding up to 1 over the class capsules",
                "routing",
            )
        with text:
            say(
                f"Self-attention routing, in one pass. For each class j, each prediction's {label('self_attention')} with all the predictions for j: "
                f"a_ji = u_hat_j|i . (sum over k of u_hat_j|k) / sqrt({D}). "
                f"Capsule i's couplings, {label('c')}, are a softmax of its a_ji over the {J} classes j, so they add up to 1.",
                f"Then s_j = sum_i (c_ij + b_ji) u_hat_j|i, where {label('prior')} is the same for every image, and v_j = (1 - 1/e^|s_j|) s_j / |s_j|: "
                f"|s_{plain(names[W])}| = {np.linalg.norm(tour.s[W]):.2f} gives |v_{plain(names[W])}| = {tour.lengths[W]:.2f}.",
            )
            said = [
                f"Measured here: the couplings keep {tour.entropy.mean():.0%} of the uniform split's entropy on average (100% is uniform), "
                + ("near uniform by the routing lab's measure" if tour.near_uniform else "not near uniform by the routing lab's measure")
                + f" (above {rules.NEAR_UNIFORM_ENTROPY:.0%} is called near uniform).",
                f"{int(near.sum())} of the {I} capsules are near uniform on their own.",
            ]
            if len(decided):
                said.append(
                    "More than half of a vote goes to one class from "
                    + ", ".join(f"capsule {i + 1} ({tour.c[i].max():.2f} to {plain(names[int(tour.c[i].argmax())])})" for i in decided)
                    + "."
                )
            else:
                said.append("No capsule sends more than half of its vote to one class.")
            said.append(f"Averaged over all {I}, the coupling to {plain(names[W])} is {tour.c[:, W].mean():.3f} (uniform {uniform:.3f}).")
            said.append(f"The prior b runs from {tour.prior.min():.3f} to {tour.prior.max():.3f}.")
            if tour.prior.max() < 0:
                said.append(
                    f"All of it is negative (mean {tour.prior.mean():.3f}, beside a uniform share of {uniform:.3f}): "
                    "each prediction enters s_j with the weight c_ij + b_ji, so a capsule whose coupling to j is below -b_ji "
                    f"pulls s_j the opposite way. For {plain(names[W])}, {int((tour.c[:, W] + tour.prior[:, W] < 0).sum())} of the {I} weights are negative."
                )
            st.info(" ".join(said))
        rows = {"primary capsule": caps}
        rows[f"a to {plain(names[W])}"] = tour.a[:, W]
        rows[f"c to {plain(names[W])}"] = tour.c[:, W]
        rows[f"b to {plain(names[W])}"] = tour.prior[:, W]
        rows[f"c + b to {plain(names[W])}"] = tour.c[:, W] + tour.prior[:, W]
        rows[f"c to {plain(names[R])}"] = tour.c[:, R]
        numbers(rows, "self_attention", "c", "prior", "u_hat")
    elif step == "lengths":
        with fig:
            show(
                bars(tour.lengths, names, W, "Class capsule lengths |v_j| after routing", "length", {"0.9": 0.9, "0.1": 0.1}),
                "dotted: the margin loss's targets",
                "lengths",
            )
        with text:
            say(
                f"The answer is the longest class capsule: **{plain(names[W])}** with length {tour.lengths[W]:.2f} (label: {plain(truth)}); the runner-up, {plain(names[R])}, has {tour.lengths[R]:.2f}.",
                f"Training used the {label('margin_loss')}, as in Sabour et al.: the right capsule longer than 0.9, every other shorter than 0.1.",
            )
            st.caption(help_text("margin_loss", "length"))
    elif step == "reconstruction":
        with fig:
            if tour.reconstruction is None:
                st.info("This Efficient-CapsNet was trained without a decoder, so there is nothing to redraw.")
            else:
                show(
                    side_by_side([image, tour.reconstruction], ["input", f"redrawn from capsule {names[W]}"]),
                    f"the decoder sees only the winning capsule's {D} numbers",
                    "reconstruction",
                )
        with text:
            say(
                f"The {label('reconstruction')} decoder of Sabour et al. (three fully connected layers) redraws the {words.shown} from the {D} numbers of capsule {plain(names[W])} alone, the others masked to 0.",
                f"Efficient-CapsNet trains it with {MSE_WEIGHT} times the mean squared pixel error beside the margin loss, which keeps the capsule's direction meaningful.",
                f"The **DigitCaps explorer** lets you nudge each of the {D} numbers and watch the drawing change.",
            )
elif routing == "em":
    if step == "input":
        with fig:
            show(side_by_side([image], [f"label: {truth}"]), looks, "input", width=260)
        with text:
            say(
                f"This is the image the tour follows through **{plain(path.stem)}**, matrix capsules with EM routing (Hinton et al. 2018, Fig. 1).",
                "Each capsule here holds a 4x4 pose matrix (how the thing sits: position, orientation, scale) and a separate activation between 0 and 1 (how present it is).",
            )
    elif step == "primary":
        a_max = tour.primary_a.max(-1)
        types = tour.primary_a.transpose(2, 0, 1)  # (types, H, W)
        with fig:
            show(
                feature_maps(types, [f"type {k + 1}" for k in range(len(types))], scale=6, columns=4, normalise=False),
                "one map per primary capsule type: its activation at every position (white = 1, black = 0)",
                "primary",
            )
            st.markdown(markdown_table({f"col {c + 1}": tour.pose[:, c] for c in range(tour.pose.shape[1])}))
            st.caption(f"The pose matrix of the most active primary capsule ({tour.pose_where}, activation {tour.primary_a.max():.2f})")
        with text:
            say(
                f"A convolution, then {tour.primary_a.shape[-1]} capsule types at each of {a_max.shape[0]}x{a_max.shape[1]} positions: "
                "each has a 4x4 pose matrix and a logistic activation (Sec. 3).",
                "Two convolutional capsule layers route by EM in small windows; the tour follows the last routing, into the class capsules.",
            )
            st.caption(help_text("pose", "a_in"))
    elif step == "votes":
        with fig:
            show(tour_vote_frame(tour, names), "before any routing: every vote is assigned equally to every class capsule", "votes")
        with text:
            say(
                f"Each lower capsule multiplies its pose by a learned 4x4 transform per class: a {label('vote')} for that class's pose "
                f"(16 numbers, drawn here in a plane through the class capsule's final mean pose, the same plane in every EM step).",
                "Votes that land close together agree on one pose for the whole: that is what EM looks for.",
            )
            st.caption(help_text("vote"))
    elif step.startswith("iteration"):
        t = int(step.removeprefix("iteration")) - 1
        with fig:
            show(
                tour_em_frames(tour, names, only=t)[0],
                "each class capsule's Gaussian: mean pose (cross), spread (ellipses); a vote's opacity is its assignment R",
                f"em-{t + 1}",
            )
            st.download_button(
                "Download every iteration (animated GIF)",
                lambda: gif_bytes(tour_em_frames(tour, names)),
                "tour-em.gif",
                "image/gif",
                key="tour_gif",
                on_click="ignore",
            )
        with text:
            say(
                f"**{label('M_step')}**: each class capsule refits its {label('mu')} and {label('sigma')} to the votes weighted by {label('R')} "
                f"and by the lower activations, and sets its {label('a_j')} (tighter = more active; {label('lambda')} = {tour.lambdas[t]:.2f} here).",
                f"**{label('E_step')}**: each vote is then reassigned by how well it fits each Gaussian."
                + (" This first M-step used equal assignments." if t == 0 else ""),
            )
            st.info(
                f"Measured here: activation of {plain(names[W])} {tour.a[t, W]:.2f}, of {plain(names[R])} {tour.a[t, R]:.2f}; "
                f"the six most active lower capsules send {plain(share(tour.R[t][tour.shown, W]))} of their vote to {plain(names[W])}."
            )
        rows = {"lower capsule": tour.shown_names, "activation a": tour.a_in[tour.shown]}
        for j in (W, R):
            rows[f"R to {plain(names[j])}"] = tour.R[t][tour.shown, j]
        numbers(rows, "a_in", "R")
    elif step == "activations":
        with fig:
            show(
                bars(tour.a[-1], names, W, "Class capsule activations after EM routing", "activation"),
                "the prediction is the most active class capsule",
                "activations",
            )
        with text:
            say(
                f"The answer is the most active class capsule: **{plain(names[W])}** with activation {tour.a[-1, W]:.2f} (label: {plain(truth)}); runner-up {plain(names[R])} with {tour.a[-1, R]:.2f}.",
                f"Training used the {label('spread_loss')}: the right class more active than every other by a margin.",
                "capsviz keeps activations in a middle range on purpose (RESULTS.md: where capsviz departs from the papers), so the winner is clear by rank, not by a value near 1.",
            )
            st.caption(help_text("spread_loss", "a_j"))

if step == "lab":
    have = lab.stored_rows([(path, meta)], ROUTINGS)
    rows = [have[path.stem, r] for r in ROUTINGS if (path.stem, r) in have]
    with fig:
        if rows:
            st.plotly_chart(
                plain_chart(
                    grouped_bars(
                        [path.stem],
                        {r.run_with: [r.test_error] for r in rows},
                        f"{path.stem} run with each routing: test error on {rows[0].n_test:,} test images",
                        "test error %",
                        {r.run_with: [lab.spread(r.test_error, r.n_test)] for r in rows},
                    )
                ),
                key="tour_lab",
            )
            st.caption("Error bars: two standard errors, how far the test images alone can move each error.")
        else:
            st.info("The routing lab has not measured this model yet: open it and press **Run the lab** (a minute or two).")
    with text:
        say(
            (
                f"You have watched self-attention set each {label('c')} in one pass."
                if routing == "self-attention"
                else f"You have watched {label('c')} move a little at each routing iteration."
            ),
            "The field's own question is whether "
            "that matters: would the same capsules do as well with every vote split evenly (uniform couplings, no routing), "
            "or split at random?",
        )
        said = lab.sentences(said_rows(rows)[0])
        for line in said[:1] + [s for s in said if s.startswith("With dynamic routing")]:
            st.markdown("- " + line)  # plain: said_rows makes the names plain
        st.page_link(
            "pages/lab.py", label="Open the routing lab: every routing, every shipped model, side by side", icon=":material/science:"
        )
        st.caption(help_text("uniform", "random_couplings"))

site_button("tour", meta)
