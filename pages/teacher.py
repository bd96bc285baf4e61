"""The Teacher page: the class at a glance, for the teacher only, and safe to project (students
appear only by anonymous labels). How many students are connected and on which page; the training
runs of every replica, with stop and remove; the uploads and their sizes, with remove; each
question's answers as they come in, revealed to the students when the teacher chooses, asked
again after a discussion (projected, a question's split and its answer show once revealed); a new
class; the answers as CSV. Everything comes from the class's
store (capsviz.store), which every app process of the server shares and which outlives a restart."""

import pandas as pd
import streamlit as st

from capsviz import access
from capsviz.analysis.questions import answers_csv, said
from capsviz.data.upload import mib, remove_upload, stored_uploads, uploads_dir
from capsviz.i18n import N_, keeping, t, tn
from capsviz.store import MAX_REASON
from capsviz.text import plain
from pages.classroom import class_store, person
from pages.common import require_router
from pages.drawn import ROOM_GROW
from pages.projector import big

CONNECTED_S = 300  # a student seen within the last 5 minutes is connected (a page open, moved or not)
REFRESH_S = 5  # the live parts redraw this often
THUMB = 56  # px: the picture a question was asked on, twice its 28 pixels
WHOLE = 12  # questions shown whole, with their split and buttons (a guided tour asks 8): those most students answered

require_router()
st.title(t("Teacher"))
who, teacher = person()
if not teacher:
    st.warning(t("This page is the teacher's. Enter the teacher key in the sidebar's Class panel."))
    st.stop()
st.markdown(
    t(
        "The class as it is now, on every app process of this server. Students appear by anonymous labels only, "
        "so this page can be projected."
    )
)
store = class_store()
projected = big()  # the room sees this page: a question's split waits for the reveal, as on the students' screens


# Each page by its title in the sidebar (app.py), by the address it is seen at.
TITLES = {
    "why": N_("Why capsules"),
    "tour": N_("Guided tour"),
    "zoo": N_("Model zoo"),
    "playground": N_("Routing playgrounds"),
    "explorer": N_("DigitCaps explorer"),
    "routing": N_("Dynamic routing"),
    "em": N_("EM routing"),
    "multimnist": N_("MultiMNIST"),
    "robustness": N_("Robustness"),
    "lab": N_("Routing lab"),
    "reproduction": N_("Reproduction"),
    "glossary": N_("Glossary"),
    "train": N_("Train"),
    "teacher": N_("Teacher"),
}


def where(page: str) -> str:
    """A page as the teacher reads it: its title; the tour with its step."""
    if page.startswith("tour:"):
        return t("guided tour, step {step}", step=page.removeprefix("tour:"))
    return t(TITLES[page]) if page in TITLES else plain(page, "table")


@st.fragment(run_every=REFRESH_S)
def the_class() -> None:
    st.subheader(t("The class"))
    pages = store.connected(CONNECTED_S)
    total = sum(pages.values())
    st.metric(t("Students connected"), total, help=t("Each browser counts once, however many tabs it has open."))
    if pages:
        st.table(pd.DataFrame({t("page"): [where(p) for p in pages], t("students"): list(pages.values())}), hide_index=True)
    runs = store.runs()
    st.markdown(t("**Training runs**"))
    if not runs:
        st.caption(t("No run is training or waiting."))
    for k, run in enumerate(runs):
        left, right = st.columns([4, 1])
        if run.state == "running":
            line = t("{model} by student {label}: training.", model=plain(run.name), label=access.label(run.owner))
        else:
            line = t("{model} by student {label}: waiting, place {place}.", model=plain(run.name), label=access.label(run.owner), place=k)
        left.markdown(line)  # plain: the names made plain in its values
        if run.stop:
            left.caption(t("Asked to stop."))
        word = t("Stop") if run.state == "running" else t("Remove")
        if right.button(word, key=f"teacher_stop_{run.rid}", disabled=run.stop):
            store.stop_run(run.rid)
            st.rerun(scope="fragment")
    st.markdown(t("**Uploads**"))
    found = stored_uploads(uploads_dir())
    if not found:
        st.caption(t("No uploads on this server."))
    else:
        st.caption(t("{size} in all.", size=mib(sum(u.bytes for u in found))))
    for u in found:
        left, right = st.columns([4, 1])
        left.markdown(
            tn(
                "{name}: {size}, sent by {n} student.",
                "{name}: {size}, sent by {n} students.",
                len(u.owners),
                name=plain(u.name),
                size=mib(u.bytes),
            )
        )
        if right.button(t("Remove"), key=f"teacher_upload_{u.digest}"):
            if not remove_upload(uploads_dir(), u.digest):
                st.toast(t("That upload is being received right now; try again in a moment."))
            st.rerun(scope="fragment")


@st.fragment(run_every=REFRESH_S)
def the_questions() -> None:
    st.subheader(t("Questions"))
    # the most students first (in any round: asked again, a question keeps its place), the oldest
    # first among as many: students who follow one link meet one question; students each on their
    # own images meet questions of their own, one a student
    splits = sorted(store.splits(), key=lambda s: -s.students)
    if not splits:
        st.caption(t("No question has been answered in this class yet."))
    elif projected:
        st.caption(t("Projected, a question shows how the class answered, and which answer is right, once you reveal it to the students."))
    whole = splits[:WHOLE]
    about = store.subjects([s.qid for s in whole])
    for s in whole:
        with st.container(border=True):
            heading(s.text, *about.get(s.qid, ("", "")))
            if s.revealed:
                shown = tn(
                    "{n} student answered in round {round}; the students see the class's answers.",
                    "{n} students answered in round {round}; the students see the class's answers.",
                    s.answered,
                    round=s.round,
                )
            else:
                shown = tn(
                    "{n} student answered in round {round}; the students do not see the class's answers.",
                    "{n} students answered in round {round}; the students do not see the class's answers.",
                    s.answered,
                    round=s.round,
                )
            st.caption(shown)  # plain: numbers only
            if s.revealed or not projected:  # projected, the split, its right answer, the reasons and the changes wait for the reveal
                labels = [plain(said(x), "table") + (" ✓" if k == s.answer else "") for k, x in zip(s.choices, s.labels, strict=True)]
                # a table of text, not a grid drawn on a canvas: the projector's large type reaches it
                st.table(pd.DataFrame({t("answer"): labels, t("students"): [s.counts[k] for k in s.choices]}), hide_index=True)
                said_why = store.reasons(s.qid, s.round)
                if said_why:
                    named = dict(zip(s.choices, s.labels, strict=True))
                    with st.expander(tn("{n} reason given", "{n} reasons given", len(said_why))):
                        for choice, reason in said_why:  # st.text: as typed, no Markdown
                            st.text(f"{plain(said(named[choice]), 'table')}: {plain(reason, 'table', MAX_REASON)}")
                if s.round > 1:
                    changed = sum(1 for first, final in store.first_and_final(s.qid).values() if first != final)
                    st.caption(
                        tn("{n} student changed their answer since round 1.", "{n} students changed their answer since round 1.", changed)
                    )
            a, b = st.columns(2)
            if a.button(t("Hide from the students") if s.revealed else t("Reveal to the students"), key=f"teacher_reveal_{s.qid}"):
                store.reveal(s.qid, not s.revealed)
                st.rerun(scope="fragment")
            if b.button(
                t("Ask again"), key=f"teacher_again_{s.qid}", help=t("A new round: students answer once more; every round is kept.")
            ):
                store.ask_again(s.qid)
                st.rerun(scope="fragment")
    others(splits[WHOLE:])


def heading(text: str, model: str, picture: str) -> None:
    """A question as the teacher tells it from the others: its words (in the teacher's language,
    whoever answered first), the model it asks about and the image it was asked on."""
    if picture:
        left, right = st.columns([1, 7], vertical_alignment="center")
        # as a data address: no copy in the server's media store on each 5-s refresh; projected, larger
        left.image(f"data:image/png;base64,{picture}", width=round(THUMB * ROOM_GROW) if projected else THUMB)
    else:
        right = st
    right.markdown(plain(said(text)))
    if model:
        right.caption(t("Model: {model}", model=plain(model)))


def others(rest) -> None:
    """The questions not shown whole, page by page: how many, how many answers, how many right."""
    if not rest:
        return
    st.markdown(
        tn(
            "**{n} more question**, none answered by more students than those above:",
            "**{n} more questions**, none answered by more students than those above:",
            len(rest),
        )
    )
    pages: dict[str, list[int]] = {}
    for s in rest:
        questions, answers, right = pages.setdefault(s.page, [0, 0, 0])
        pages[s.page] = [questions + 1, answers + s.answered, right + s.counts.get(s.answer, 0)]
    st.table(
        pd.DataFrame(
            {
                t("page"): [where(p) for p in pages],
                t("questions"): [q for q, _, _ in pages.values()],
                t("answers"): [a for _, a, _ in pages.values()],
                t("right answers"): [r for _, _, r in pages.values()],
            }
        ),
        hide_index=True,
    )
    st.caption(
        t(
            "Students who each look at their own images meet questions of their own. To discuss one question with the whole "
            "class, send everyone the same link: their answers then gather in one question above."
        )
    )


the_class()
the_questions()

st.subheader(t("This class"))
left, right = st.columns(2)
left.download_button(
    t("Export the answers (CSV)"),
    keeping(lambda: answers_csv(store.answer_rows(), access.label)),  # its question texts in the teacher's language
    "capsviz-answers.csv",
    "text/csv",
    key="teacher_export",
    on_click="ignore",
)
sure = right.checkbox(t("I want to clear every answer"), key="teacher_sure")
if right.button(t("Start a new class"), key="teacher_new_class", disabled=not sure, help=t("Clears every question and answer.")):
    store.new_class()
    st.toast(t("A new class: every answer is cleared."))
    st.rerun()
