"""Predict, then see: a question before the figure that answers it (capsviz.analysis.questions).

`ask(question)` shows the question; until the student commits a choice (with an optional one-line
reason) or skips, it returns False and the page stops before its figure. The choices are a fragment
of their own: choosing reruns the question, not the page. Then it says whether they
were right and why, in one sentence, and, once the teacher has revealed it (the Teacher page), how
the class answered. The teacher sees the question with its answer and the class's split, and the
figure at once; on the projector, the question and its choices for the room, until the teacher
reveals the answer. A student's answer is recorded in the class's store (capsviz.store), under the
identity the server signed: nobody can answer for another. Not a page itself (app.py lists the pages).
"""

from __future__ import annotations

import streamlit as st

from capsviz.analysis.questions import Question, said, split_words
from capsviz.i18n import keeping, t, tn
from capsviz.text import plain
from capsviz.viz import thumbnail
from pages.classroom import class_store, person
from pages.projector import big
from pages.state import STATE


def _record(q: Question, who: str, choice: str | None, reason: str) -> int:
    """Store a committed answer; the round it counts in (1 where the store cannot be reached)."""
    if choice is None:
        return _round(q, who)[0]
    try:
        text, labels = q.kept()  # in no one language: each reader sees them in theirs
        about = (q.model_name(), "" if q.picture is None else thumbnail(q.picture))  # the Teacher page tells questions apart by them
        return class_store().answer(q.qid, q.page, text, q.keys, labels, q.answer, who, choice, reason, about)
    except Exception:  # noqa: BLE001 - the reveal still comes; the Teacher page just does not count it
        return 1


def _keep(qid: str, rnd: int, choice: str | None) -> None:
    """This session's answer to question `qid` in round `rnd` (None: skipped), which `ask` then reveals."""
    asked = STATE.asked.get()
    asked[qid] = (rnd, choice)
    STATE.asked.set(asked)


def _commit(q: Question, who: str, pick, why) -> None:
    """The commit button's callback: the chosen answer and its reason, stored and kept."""
    choice = pick.get()
    if choice is not None:
        _keep(q.qid, _record(q, who, choice, why.get()), choice)


def _round(q: Question, who: str) -> tuple[int, str | None, bool]:
    try:
        return class_store().mine(q.qid, who)
    except Exception:  # noqa: BLE001
        return 1, None, False


def ask(q: Question, place=None) -> bool:
    """Show the question in `place` (a container; the page's body by default); True once the
    figure may be shown (the teacher, or a student who committed or skipped this round)."""
    place = place or st.container()
    who, teacher = person()
    rnd, done, choice, revealed = _state(q, who)
    if not teacher and not done:
        with place:
            _choosing(q, who, rnd)
        return False
    box = _box(place, q)
    if teacher and big():
        return _projected(q, box)
    if teacher:
        box.caption(t("The answer: “{answer}”. {why}", answer=plain(q.label(q.answer)), why=plain(str(q.why))))
        if (split := _split(q)) is not None:
            box.caption(_split_said(split))
        return True
    verdict = q.verdict(choice)
    (box.success if choice == q.answer else box.info)(plain(t("{verdict} {why}", verdict=verdict, why=str(q.why))))
    if revealed and (split := _split(q)) is not None:
        box.caption(t("How the class answered: {split}", split=_split_said(split)))
    return True


@st.fragment
def _choosing(q: Question, who: str, rnd: int) -> None:
    """The question's choices, reason and buttons, a fragment: a choice or a reason reruns only the
    question, not the page and its figures. Once the student commits or skips (the buttons'
    callbacks keep it), the whole page runs again and reveals."""
    done = STATE.asked.get().get(q.qid)
    if done is not None and done[0] == rnd:
        st.rerun(scope="app")
    box = _box(st, q)
    pick, why = STATE.answer_pick(qid=q.qid), STATE.answer_reason(qid=q.qid)
    if rnd > 1:
        box.caption(t("Your teacher asks again: answer once more after the discussion."))
    choice = box.radio(
        t("Your answer"),
        list(q.keys),
        index=None,
        format_func=keeping(lambda k: plain(q.label(k))),
        key=pick.key,
        label_visibility="collapsed",
    )
    box.text_input(t("Why? (optional, one line)"), max_chars=200, key=why.key)
    left, right = box.columns(2)
    # recorded in the buttons' callbacks, before the question's next run, which then reruns the page
    left.button(
        t("Commit my answer"),
        type="primary",
        disabled=choice is None,
        key=f"commit_{q.qid}",
        use_container_width=True,
        on_click=_commit,
        args=(q, who, pick, why),
    )
    right.button(t("Skip: just show me"), key=f"skip_{q.qid}", use_container_width=True, on_click=_keep, args=(q.qid, rnd, None))


def _box(place, q: Question):
    """The question's bordered box in `place`, headed by the question."""
    box = place.container(border=True)
    box.markdown(t("**Predict first.** {question}", question=plain(str(q.text))))
    return box


def _state(q: Question, who: str) -> tuple[int, bool, str | None, bool]:
    """(the question's current round; whether this student has answered it in that round, in this
    tab or another, or skipped it in this session; their choice, None for a skip; whether the
    teacher revealed the class's answers)."""
    rnd, stored, revealed = _round(q, who)
    if stored is not None:  # answered in this round (in this tab or another)
        return rnd, True, stored, revealed
    done = STATE.asked.get().get(q.qid)
    if done is not None and done[0] == rnd:
        return rnd, True, done[1], revealed
    return rnd, False, None, revealed


def _split(q: Question):
    try:
        return class_store().split(q.qid)
    except Exception:  # noqa: BLE001 - the store out of reach: no count, the question still works
        return None


def _split_said(split) -> str:
    """How a question's current round was answered, in words, made plain."""
    return plain(split_words(split.counts, {k: said(x) for k, x in zip(split.choices, split.labels, strict=True)}))


def _projected(q: Question, box) -> bool:
    """The teacher's question on the projector: the choices for the room, how many have answered,
    and the answer, the class's split and the figure only once the teacher reveals them (to the
    students' screens too)."""
    shown = STATE.projected_reveals.get()
    split = _split(q)
    if q.qid not in shown:
        # lettered, not numbered: a choice is often a digit ("which class?"), and "3" must not mean two things
        box.markdown("  \n".join(f"**{letter}** · {plain(q.label(k))}" for letter, k in zip("ABCDEFGHIJ", q.keys, strict=False)))
        n = split.answered if split is not None else 0
        box.caption(tn("{n} student has answered so far.", "{n} students have answered so far.", n))
        if box.button(t("Reveal the answer"), type="primary", key=f"reveal_{q.qid}"):
            STATE.projected_reveals.set([*shown, q.qid])
            if split is not None:
                class_store().reveal(q.qid)
            st.rerun()
        return False
    box.success(t("The answer: “{answer}”. {why}", answer=plain(q.label(q.answer)), why=plain(str(q.why))))
    if split is not None:
        box.caption(t("How the class answered: {split}", split=_split_said(split)))
    return True


def answered(q: Question) -> tuple[bool, str | None]:
    """(whether this student has answered `q` in its current round, in this tab or another, or
    skipped it in this session; their choice, None for a skip), as `ask` decides whether to reveal."""
    _, done, choice, _ = _state(q, person()[0])
    return done, choice
