"""Why capsules: the papers' argument before the mechanics (Sabour et al. 2017, Sec. 1; Hinton et
al. 2018, Sec. 1 and 2), each claim measured on the shipped models and the real test images."""

from urllib.parse import quote

import streamlit as st

from capsviz.analysis import why
from capsviz.analysis.links import chosen
from capsviz.i18n import gap, keeping, t
from capsviz.memo import digest
from capsviz.text import plain
from capsviz.viz import to_image
from capsviz.viz import why as figures
from pages.active import checkpoints, load_model, model_key, page_model, test_set
from pages.common import require_router
from pages.drawn import chart, kept, picture, show
from pages.inputs import pick_image
from pages.linking import keep_link_note, keep_within, show_link_note
from pages.projector import big
from pages.state import STATE, link_asks

require_router()
st.title(t("Why capsules"))
st.markdown(
    t(
        "Every introduction to capsules starts from one argument: a CNN's pooling keeps whether a part is present and "
        "throws away where it is, so its answer is the same for a face with its eyes and mouth swapped; a capsule's length "
        "says whether a thing is there and its direction says how it is posed, so when the digit moves the capsule should "
        "change with it (equivariance) while its answer stays (invariance). Each claim is measured below on the shipped "
        "models and the real test images, and each sentence says what the numbers beside it show, also where they are not "
        "what the story says."
    )
)
st.markdown(
    t("Words of this chapter, each a link to its glossary entry:")
    + gap()
    + " · ".join(f"[{shown}](glossary?term={quote(word)})" for shown, word in why.chapter_words())  # plain: our own words
)
LARGE = big()
listing = checkpoints()
model, meta, path = page_model(
    lambda m: why.vector_fits(m) and why.baseline_for(m, listing) is not None,
    t("a capsule network with a decoder and a baseline CNN trained on the same images"),
    t(
        "**{name}** is {family}. This chapter sets a capsule network with a decoder beside a baseline CNN trained on the "
        "same images; the model folder has no such pair."
    ),
)
names = [plain(n) for n in meta.class_names]
cnn_path = why.baseline_for(meta, listing)
cnn, _ = load_model(cnn_path)
data = test_set(meta.image_dataset, meta.config.in_size, quiet=True)
with st.expander(t("The digit to follow (a test image, a drawing or an upload: change it here)"), expanded=False):
    picked = pick_image(meta.image_dataset, names, meta.config.in_size, model)
if picked is None:
    st.info(t("Open the box above and pick a test image, draw one or upload one."))
    st.stop()
image = picked[0]
pair = (STATE.model_key.get(), model_key(cnn_path))  # names the two models in every kept result
st.caption(t("Capsule network: {caps}. Baseline CNN: {cnn}.", caps=plain(path.stem), cnn=plain(cnn_path.stem)))


def sweep(kind: str, sweep_path, sweep_model, cnn_model=None, cnn_file=None):
    """A test-set sweep of the chapter, kept once per process for every session (and on disk)."""
    if data is None:
        return None
    with st.spinner(t("Measuring on {n} test images (once per server) ...", n=min(why.WHY_IMAGES, len(data)))):
        return kept(
            why.kept_sweep,
            kind,
            sweep_path,
            sweep_model,
            data,
            why.WHY_IMAGES,
            cnn_file,
            cnn_model,
            key=(kind, model_key(sweep_path), model_key(cnn_file) if cnn_file else "", data.name, len(data)),
        )


def linked_choice(slot, what: str) -> None:
    """A radio's value from the opening link, named by its option (not by the words the radio
    shows, which follow the reader's language): one that names none is replaced by the default,
    with a note."""
    if not slot.present:
        raw = link_asks(slot.param)
        slot.set(slot.default if raw is None else keep_link_note(slot.param, chosen(raw, slot.choices, slot.default, what)).value)
    show_link_note(slot.param, slot.get())


def say(sentences: list[str]) -> None:
    st.markdown("\n\n".join(sentences))


# --- 1. invariance against equivariance
st.header(t("1. Invariance against equivariance"))
st.markdown(
    t(
        "Move or turn the digit. An invariant network gives the same output whatever the pose; an equivariant one changes "
        "its output with the pose, in a way that can be read back, while its answer stays. Compare the CNN's pooled "
        "features and class scores with the winning capsule's vector and its reconstruction."
    )
)
linked_choice(STATE.why_change, t("change"))
kind = st.radio(
    t("Change"),
    STATE.why_change.choices,
    format_func=keeping(lambda k: t("Shift") if k == "shift" else t("Turn")),
    horizontal=True,
    key=STATE.why_change.key,
)
st.query_params[STATE.why_change.param] = kind
if kind == "shift":
    keep_within(STATE.why_shift, 0, 4, 4, t("shift"))
    amount = st.select_slider(
        t("Pixels to the right"), list(why.SHIFTS), key=STATE.why_shift.key, bind="query-params"
    )  # plain: numbers only
else:
    keep_within(STATE.why_angle, -30, 30, 30, t("turn"))
    amount = st.select_slider(
        t("Degrees, anticlockwise"), list(why.ANGLES), key=STATE.why_angle.key, bind="query-params"
    )  # plain: numbers only

seen = digest(pair, image)
view = kept(why.one_image, model, cnn, image, kind, key=(seen, kind))
k = view["values"].index(float(amount))
unit = t("{v:+.0f} px") if kind == "shift" else t("{v:+.0f}°")
captions = [unit.format(v=v) if v else "0" for v in view["values"]]
side = 168 if LARGE else 98  # a digit's picture: 28 pixels drawn 6 (or 3.5) times over
st.markdown(t("**This digit, moved** (top) **and redrawn by the winning capsule** (bottom):"))
show(st, [picture(to_image, a, 6, width=side) for a in view["inputs"]], captions, side)  # plain: numbers only
show(st, [picture(to_image, a, 6, width=side) for a in view["reconstructions"]], captions, side)  # plain: numbers only
cols = st.columns(1 if LARGE else 2)
cols[0].plotly_chart(chart(figures.this_digit, view, kind, amount, LARGE, key=(seen, kind, amount, LARGE)), key="why_digit")
cols[-1].plotly_chart(chart(figures.dimensions, view, amount, LARGE, key=(seen, kind, amount, LARGE)), key="why_dims")
if float(amount) != 0.0:
    st.markdown(why.one_image_words(view, names, amount))  # plain: the class names made plain above

measured = sweep("invariance", path, model, cnn, cnn_path)
if measured is None:
    st.info(t("The test images are not on this server, so the measurements over the test set cannot be shown."))
else:
    cols = st.columns(1 if LARGE else 3)
    specs = (figures.changes, figures.stays, figures.capsule)
    for n, build in enumerate(specs):
        cols[n % len(cols)].plotly_chart(chart(build, measured, kind, amount, LARGE), key=f"why_inv_{n}")
    say(why.invariance_words(measured, kind, amount))

# --- 2. parts in the wrong places
st.header(t("2. Parts in the wrong places"))
st.markdown(
    t(
        "The scrambled face of every capsule explainer: all the parts present, in the wrong places. The story goes that a "
        "network that only asks whether the parts are there still sees the face, and one whose parts must agree on one pose "
        "does not. Here the halves or quadrants of each digit trade places; each network's answer is under each picture."
    )
)
pictures, lines = kept(why.parts_views, model, cnn, image, names, key=(seen, tuple(names)))
side = 200 if LARGE else 140
for place, a, words in zip(st.columns(len(pictures)), pictures, lines, strict=True):
    show(place, picture(to_image, a, 8, width=side), None, side)
    place.markdown("  \n".join(words.split("\n")))
parts = sweep("parts", path, model, cnn, cnn_path)
if parts is not None:
    linked_choice(STATE.why_scheme, t("parts moved"))
    scheme = st.radio(
        t("Parts moved"),
        STATE.why_scheme.choices,
        format_func=keeping(lambda s: t(why.SCHEME_NAMES[s])),  # plain: our own words
        horizontal=True,
        key=STATE.why_scheme.key,
    )
    st.query_params[STATE.why_scheme.param] = scheme
    cols = st.columns(1 if LARGE else 2)
    cols[0].plotly_chart(chart(figures.parts_right, parts, LARGE), key="why_parts_right")
    cols[-1].plotly_chart(chart(figures.parts_scores, parts, LARGE), key="why_parts_scores")
    say(why.parts_words(parts, scheme))

# --- 3. pose
st.header(t("3. Pose, not just presence: inverse graphics"))
say(why.inverse_graphics_words())
st.page_link("pages/explorer.py", label=t("Open the DigitCaps explorer"), icon=":material/arrow_outward:")

# --- 4. matrix capsules
st.header(t("4. Matrix capsules under a change of viewpoint"))
st.markdown(
    t(
        "In matrix capsules each part votes for the pose of the whole (a 4x4 matrix). When the viewpoint changes, every "
        "part's pose changes the same way, so the votes should move together: their mean moves, their spread stays, and "
        "their agreement survives. Coordinate addition adds to each vote where its part sits in the picture."
    )
)
matrices = [(p, m) for p, m in listing if not isinstance(m, str) and why.matrix_fits(m) and m.image_dataset == meta.image_dataset]
if not matrices:
    st.info(t("No matrix-capsule model trained on these images is in the model folder."))
else:
    m_path = matrices[0][0]
    matrix, _ = load_model(m_path)
    st.caption(t("Matrix-capsule model: {name}.", name=plain(m_path.stem)))
    if float(amount) != 0.0:
        votes = kept(why.one_image_votes, matrix, image, kind, amount, key=(model_key(m_path), digest(image), kind, amount))
        cols = st.columns(1 if LARGE else 2)
        for n, which in enumerate(("with", "without")):
            cols[n % len(cols)].plotly_chart(
                chart(figures.vote_cloud, votes, which, LARGE, key=(model_key(m_path), digest(image), kind, amount, which, LARGE)),
                key=f"why_cloud_{which}",
            )
    viewpoint = sweep("viewpoint", m_path, matrix)
    if viewpoint is not None:
        cols = st.columns(1 if LARGE else 3)
        for n, build in enumerate((figures.votes_move, figures.coordinates, figures.coordinates_kept)):
            cols[n % len(cols)].plotly_chart(chart(build, viewpoint, kind, amount, LARGE), key=f"why_view_{n}")
        say(why.viewpoint_words(viewpoint, kind, amount))
