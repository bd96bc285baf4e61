"""The served class in every page's run: who this browser is (a signed identity), whether it is the
teacher's, the teacher key's entry and the sidebar's Class panel."""

from __future__ import annotations

import time

import streamlit as st

from capsviz import access
from capsviz.errors import CapsvizError
from capsviz.i18n import N_, keeping, t, tn
from capsviz.text import plain
from pages.common import checkpoint_dir
from pages.state import STATE

TURNS = access.Turns()  # a student's page runs in this process, one at a time (app.py)
SEATS = access.Seats.from_env()  # students' page runs at once in this process (app.py)


def address() -> str:
    """This browser's address (capsviz.access.client_address): new identities and key guesses are counted by it."""
    peer = st.context.ip_address
    peer = peer if isinstance(peer, str) else None  # None: loopback (and Streamlit's AppTest, which has no connection)
    return access.client_address(peer, st.context.headers.get_all("X-Forwarded-For"))


def person() -> tuple[str, bool]:
    """(this browser's id, whether it is the teacher's) for this run (capsviz.access): the id the
    server signed into its cookie, the same in every tab and after a reload; where the browser
    brought none (or one the server did not sign), a new one, minted once for the session and
    kept in its cookie (`keep_identity`). The teacher: on the server's own machine, or a browser
    that entered the key (on any app process of the server: capsviz.access.keyed)."""
    folder = checkpoint_dir()
    where = address()
    who = access.identity(folder, st.context.cookies)
    if who is None:
        who = STATE.session_id.get()
        if not who:
            who, cookie = access.mint(folder, where)
            STATE.session_id.set(who)
            STATE.id_cookie.set(cookie or "")
    teacher = where == access.LOCAL or access.keyed(folder, who)
    STATE.teacher.set(teacher)  # read by the clear-cache guard
    return who, teacher


def keep_identity() -> None:
    """Once a session: put its newly minted, signed identity in the browser's cookie, so its
    other tabs and its reloads are the same student (no cookie for an address's shared identity)."""
    cookie = STATE.id_cookie.pop("")
    # one place on every run, filled on the first: an element only the first run draws would move
    # every element after it on the next run, and the browser would drop what a student is typing
    spot = st.sidebar.empty()
    if cookie:
        spot.html(
            f"<script>document.cookie = '{access.ID_COOKIE}={cookie}; Path=/; Max-Age=31536000; SameSite=Lax';</script>",
            unsafe_allow_javascript=True,
        )


_seen: dict[str, tuple[float, str]] = {}  # who -> (when this process last told the store, the page)


def seen(who: str, page: str, teacher: bool) -> None:
    """Tell the class's store this student has `page` open (the Teacher page counts them): at
    most every 30 s per student and process, and at once on a page change."""
    now = time.monotonic()
    last = _seen.get(who)
    if last and last[1] == page and now - last[0] < 30:
        return
    _seen[who] = (now, page)
    try:
        class_store().seen(who, address(), page, teacher)
    except Exception:  # noqa: BLE001 - a model folder that cannot hold the store: nothing counted, nothing broken
        pass


def class_store():
    from capsviz.store import store

    return store(checkpoint_dir())


def teacher_key_entry() -> None:
    """The key is typed on the sidebar's Class panel only (`key_typed`); a link's ?teacher= is
    taken out of the address and not tried (a link stays in the browser's history). A key the
    host set too short stops every page with the reason."""
    try:
        access.announce(checkpoint_dir())
    except CapsvizError as e:
        st.error(t("This server cannot run its class: {why}", why=plain(e)))
        st.stop()
    if st.query_params.get("teacher") is not None:
        del st.query_params["teacher"]
        st.toast(t("A teacher key in a link is not used: enter it in the sidebar's Class panel."))


def _try_key(key: str) -> None:
    tried = access.try_key(checkpoint_dir(), key, address())
    if tried == "teacher" and access.shared(person()[0]):
        st.toast(
            tn(
                "The key is right, but this browser shares one identity with others on its network (too many new browsers came "
                "from it at once), and they would all become the teacher: reload the page after {n} minute and enter it again.",
                "The key is right, but this browser shares one identity with others on its network (too many new browsers came "
                "from it at once), and they would all become the teacher: reload the page after {n} minutes and enter it again.",
                access.IDENTITY_WINDOW_S // 60,
            )
        )
    elif tried == "teacher":
        access.key_entered(checkpoint_dir(), person()[0])
        st.toast(t("You are the teacher on this server."))
    elif tried == "wait":
        st.toast(
            tn(
                "Too many wrong keys were tried: try again in {n} minute.",
                "Too many wrong keys were tried: try again in {n} minutes.",
                access.GUESS_WINDOW_S // 60,
            )
        )
    else:
        st.toast(t("That is not this server's teacher key."))


def key_typed() -> None:
    """The sidebar's teacher key field, on change: tried once, then emptied."""
    typed = STATE.teacher_key_typed.get()
    STATE.teacher_key_typed.set("")
    if typed:
        _try_key(typed)


def class_panel(teacher: bool) -> None:
    """The sidebar's class settings: the teacher chooses what students may do; a student can
    enter the teacher key."""
    folder = checkpoint_dir()
    with st.sidebar.expander(t("Class"), expanded=False):
        if teacher:
            mode = access.settings(folder)["students"]
            pick = st.radio(
                t("Students may"),
                list(access.MODES),
                index=list(access.MODES).index(mode),
                format_func=keeping(lambda m: t(access.MODES[m])),
                key="class_mode",
            )
            if pick != mode:
                try:
                    access.set_student_mode(folder, pick)
                except OSError as e:
                    st.error(t("Cannot keep the setting in the model folder: {why}", why=plain(e.strerror or e)))
            st.caption(t("You are the teacher here: you may train, replace any model and clear the caches (the app menu's Clear cache)."))
        else:
            mode = access.settings(folder)["students"]
            st.caption(t(STUDENTS_MAY[mode]))
            st.text_input(t("Teacher key"), type="password", key=STATE.teacher_key_typed.key, on_change=key_typed)


# What the Class panel tells a student they may do: one whole sentence per mode.
STUDENTS_MAY = {
    "explore": N_("Students on this server may explore only: every page, their own pictures and drawings; no training or uploads of data."),
    "train": N_("Students on this server may explore, and train models and upload data within the class's bounds."),
}
