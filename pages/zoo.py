"""Home: what capsules are, and every shipped or freshly trained model as a card."""

import streamlit as st

from capsviz.adapter import how_it_computes, import_notes
from capsviz.analysis.zoo import INTRO, card, classes_line, epochs_note
from capsviz.checkpoint import list_checkpoints, total_training, training_labels
from capsviz.config import user_dataset
from capsviz.data.user import short_name
from capsviz.i18n import t
from capsviz.text import MAX_SENTENCES, plain, recorded
from capsviz.viz import squash_curve
from pages.active import checkpoints, model_key
from pages.common import checkpoint_dir, public, require_router
from pages.drawn import chart, kept
from pages.linking import keep_within
from pages.state import STATE
from pages.terms import term_help, uses

require_router()
uses("test_error", "pair_error", "epoch")  # the glossary entries its text names (pages.terms)


st.title(t("capsviz: watch capsules route"))
st.markdown(t(INTRO))
left, right = st.columns([2, 1])
with left:
    st.plotly_chart(chart(squash_curve), key="squash_plot")
with right:
    keep_within(STATE.squash, *STATE.squash.bounds, STATE.squash.default, t("length |s|"))
    s = st.slider(
        t("Length |s| before squash"),
        0.0,
        5.0,
        1.0,
        0.1,
        key=STATE.squash.key,
        bind="query-params",
        help=term_help("squash", "length"),
    )
    st.metric(t("Length after squash"), f"{s * s / (1 + s * s):.3f}")
    st.caption(t("Move the slider: a capsule can never claim more than certainty, and weak evidence is nearly silenced."))

st.header(t("Models"))
found = checkpoints()
if not found:
    st.info(t("No checkpoints in `checkpoints/` yet. Train one on the **Train** page."))
for path, meta in found:
    c = meta.config
    m = meta.metrics
    said = kept(card, meta, key=model_key(path))  # the card's words: the same for every session, made once per version of the file
    with st.container(border=True):
        st.subheader(plain(path.stem))
        cols = st.columns(4)
        own = user_dataset(meta.image_dataset) is not None
        cols[0].markdown(
            "  \n".join(
                [t("**Family** {family}", family=said.family), t("**Routing** {routing}", routing=said.routing)]
                + [t("**Decoder** {decoder}", decoder=said.decoder)]
            )
        )
        for line in how_it_computes(meta):  # a model written elsewhere: checked or not, and how it computes
            cols[0].caption(plain(line))
        if notes := import_notes(meta):  # and what its import noted, in the reader's language
            with cols[0].expander(t("What the import noted")):
                st.markdown("\n".join(f"- {plain(note, limit=MAX_SENTENCES)}" for note in notes))
        total = total_training(meta)  # fine-tuned: the runs it adds up
        # the machines and the measuring note are the file's own record, quoted as such in every language
        epochs, hardware = training_labels({**total, "hardware": [recorded(h) for h in total["hardware"]]})
        cols[1].markdown(
            "  \n".join(
                [
                    t("**Parameters** {size}", size=said.size.words()),
                    t("**Dataset** {dataset}", dataset=plain(short_name(meta.image_dataset))),
                    t("**Epochs** {epochs}", epochs=epochs),
                ]
            )
        )
        if own:
            cols[1].caption(plain(classes_line(meta.class_names, c.in_size, c.in_channels)))
        if note := epochs_note(meta):
            cols[1].caption(note)  # plain: the zoo's own words from numbers, no name in it
        cols[2].metric(
            said.error_name,  # plain: our catalog's words
            said.error,
            help=t("As the checkpoint records it: {how}", how=recorded(m.how)) if m.how else None,
        )
        cols[2].caption(said.error_means)
        cols[2].caption(said.paper)
        if said.guessing:
            cols[2].caption(said.guessing)
        cols[3].markdown(  # plain: the machines' names are code spans (capsviz.text.recorded)
            t("**Trained in** {minutes} min  \n**on** {hardware}", minutes=f"{total['training_time_s'] / 60:.0f}", hardware=hardware)
        )
        if st.button(t("Use this model"), key=f"use_{path.stem}"):
            STATE.pending_model.set(path.name)  # the sidebar applies it before drawing its picker
            st.rerun()

# Files that fail the checks on reading (capsviz.schema) are left out of every picker; listing
# them here with the reason tells their owner what to fix instead of hiding them silently.
for path, reason in list_checkpoints(checkpoint_dir()):
    if isinstance(reason, str):
        st.warning(t("**{name}** cannot be used: {reason}", name=plain(path.name), reason=plain(public(reason))), icon=":material/block:")
