"""The sidebar every page shares: the language, the active model and its data line, and the notes
about a link's model."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from capsviz.checkpoint import list_checkpoints
from capsviz.config import user_dataset
from capsviz.data import DATASETS
from capsviz.data.sources import SOURCES, locate
from capsviz.data.user import short_name
from capsviz.devices import pick_device
from capsviz.i18n import keeping, t
from capsviz.site.links import runs_in_site, site_link
from capsviz.text import plain
from pages import classroom
from pages.active import ALL, active_name, checkpoints
from pages.classroom import class_panel, keep_identity, seen, teacher_key_entry
from pages.common import checkpoint_dir, public
from pages.language import language_switch
from pages.state import STATE, link_asks, read_link


def sidebar(page: str = "") -> tuple[str, bool]:
    """The active model and the status line; `page` is the page about to run. On a page change the
    test image picked on the last page is handed to this one (each page has its own widget).
    Returns `person()`'s (id, teacher), read once for the run."""
    if STATE.page_now.get(page) != page and STATE.image_index.present:
        STATE.image_pending.set(STATE.image_index.get())
    STATE.page_now.set(page)
    read_link()  # the link this session opened with, once
    teacher_key_entry()
    who, teacher = classroom.person()  # through its module: tests stand in for it there
    keep_identity()
    seen(who, f"tour:{STATE.tour_step.get()}" if page in ("tour", "home", "") else page, teacher)
    found = checkpoints()
    with st.sidebar:
        language_switch()
        st.markdown("### " + t("Active model"))
        if not found:
            st.caption(t("No checkpoints yet."))
        else:
            datasets = sorted({m.dataset or "?" for _, m in found})
            pending = STATE.pending_model.get(None)
            if not STATE.link_model_seen.present:  # a shared link's model, on the session's first run only
                STATE.link_model_seen.set(True)
                pending = pending or link_asks(STATE.model_pick.param)
                if pending and all(p.name != pending for p, _ in found):
                    STATE.link_problem.set((pending, why_unusable(pending)))
            pending_meta = next((m for p, m in found if p.name == pending), None)
            if pending_meta and STATE.dataset_pick.get() not in (ALL, pending_meta.dataset):
                STATE.dataset_pick.set(ALL)  # a link or card to another dataset's model wins
            st.selectbox(
                t("Dataset"),
                [ALL, *datasets],
                key=STATE.dataset_pick.key,
                format_func=keeping(lambda d: t(ALL) if d == ALL else plain(short_name(d))),
                help=t("Show only the models trained on this dataset"),
            )
            STATE.model_pick.set(active_name())  # before the widget: links and cards win
            STATE.pending_model.pop()
            shown = [p.name for p, m in found if STATE.dataset_pick.get() in (ALL, m.dataset)]
            name = st.selectbox(t("Model"), shown, key=STATE.model_pick.key, help=t("Used by every page"), format_func=plain)
            st.query_params["model"] = name
        device = pick_device("auto")
        active = next((m.dataset for p, m in found if p.name == STATE.model_pick.get(None)), None)
        where = data_line(active or "mnist")
        from capsviz.kernels import policy  # the EM kernel is a CPU path: say why it is off, as `capsviz doctor` does

        why = policy.why_off(policy.NATIVE_EM, device) if device.type == "cpu" else None
        parts = [t("device: {device}", device="GPU" if device.type == "cuda" else device.type.upper()), where]
        if why:
            parts.append(t("native EM kernel off: {why}", why=why))
        st.caption(" · ".join(parts))  # a list of facts, each its own message
        STATE.site_slot.set(
            ("tour" if page in ("", "home") else page, st.empty())
        )  # (home, "/", runs the tour) filled by `site_button` once the page has put its view in the address
    class_panel(teacher)
    link_notice(STATE.model_pick.get(None))
    return who, teacher


KEEP = object()


def site_button(page: str, meta, step=KEEP) -> None:
    """At the end of a page the static site also has: a link to the site's view of the same model,
    image and settings, when the host names one ($CAPSVIZ_SITE_URL) and the site can run the model.
    `step`: the site's own step where it differs from the page's (None: the site's first)."""
    query = st.query_params.to_dict()
    if step is not KEEP:
        query.pop("step", None)
        if step is not None:
            query["step"] = str(step)
    url = site_link(page, query, meta is not None and runs_in_site(meta.config))
    slot_page, slot = STATE.site_slot.get((None, None))
    if url and slot_page == page:
        slot.link_button(
            t("Open this view in the static site"), url, help=t("The same model, image and settings, computed in your browser")
        )


def data_line(dataset: str) -> str:
    """Whether the active model's images are on this server, in a few words (never its folders:
    `capsviz doctor` prints them for the server's owner)."""
    user = user_dataset(dataset)
    if user:
        there = Path(user[1]).expanduser().exists()
        if there:
            return t("{name} images found", name=short_name(dataset))
        return t("{name} images not on this server", name=short_name(dataset))
    source = DATASETS[dataset].source  # MultiMNIST is drawn from MNIST
    place, _ = locate(SOURCES[source])  # where only: checksums are `python -m capsviz data`'s job (slow)
    if place:
        return t("{source} data found", source=source)
    return t("data: {source} not found (see `python -m capsviz data`)", source=source)


def why_unusable(name: str) -> str:
    """Why a model named in a link is not among the usable ones, in the model folder's own words."""
    folder = checkpoint_dir()
    for path, meta in list_checkpoints(folder):
        if path.name == name and isinstance(meta, str):
            return public(meta).removeprefix(f"{name}: ")
    if name.endswith(".safetensors"):
        return t("there is no model of that name in this server's model folder")
    return t("there is no model of that name in this server's model folder (names end in .safetensors)")


def link_notice(shown: str | None) -> None:
    """At the top of the page, while the session still shows the model put in place of the one
    its link asked for: which model that was, why it cannot be used, and which one is shown."""
    if not STATE.link_problem.present:
        return
    asked, why = STATE.link_problem.get()
    if STATE.link_shown.get(shown) != shown:  # the user has picked another model since
        STATE.link_problem.pop()
        STATE.link_shown.pop()
        return
    STATE.link_shown.set(shown)
    words = dict(asked=plain(asked), why=plain(why), shown=shown)
    if shown:
        said = t("The link asks for the model **{asked}**, which cannot be used: {why}. This page is showing **{shown}** instead.", **words)
    else:
        said = t("The link asks for the model **{asked}**, which cannot be used: {why}. No other model is available.", **words)
    st.warning(
        said,
        icon=":material/link_off:",
    )
