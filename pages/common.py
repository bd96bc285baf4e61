"""What every page shares: cached loaders, the sidebar model picker and the status line.
Not a page itself (app.py lists the pages)."""

from __future__ import annotations

import os
import time
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import streamlit as st
import torch

from capsviz import access
from capsviz.analysis import find_mistake, image_at, predict
from capsviz.analysis.links import Linked, chosen, linked, several
from capsviz.checkpoint import list_checkpoints
from capsviz.config import user_dataset
from capsviz.data import DATASETS, model_test_set
from capsviz.data.sources import SOURCES, locate
from capsviz.data.transforms import fit_drawing, mnist_style, picture_to_digit, picture_to_input
from capsviz.data.user import short_name
from capsviz.devices import pick_device, serving_threads
from capsviz.errors import CapsvizError
from capsviz.glossary import class_words
from capsviz.i18n import N_, keeping, language, speaking, t, tn
from capsviz.model_cache import ModelCache
from capsviz.progress import time_left
from capsviz.registry import family_words
from capsviz.schema import CheckpointMeta
from capsviz.site.links import runs_in_site, site_link
from capsviz.text import MAX_SENTENCES, plain
from pages.language import language_switch
from pages.state import STATE, Key, link_asks, link_asks_all, read_link

ROOT = Path(__file__).resolve().parents[1]


def require_router() -> None:
    """Hand a legacy run back to app.py's st.navigation router.

    The design fixes the page folder's name as pages/, which Streamlit also reads as a legacy
    multipage folder: on a fresh server whose first request is a deep link (a shared
    /explorer?model=... URL), it runs that page file directly, without app.py, and lists every
    file in pages/ in the sidebar. Turning the legacy mode off and rerunning runs app.py, which
    routes to the same URL. (Streamlit 1.67: PagesManager.uses_pages_directory.)"""
    from streamlit.runtime.pages_manager import PagesManager

    if getattr(PagesManager, "uses_pages_directory", False):
        PagesManager.uses_pages_directory = False
        st.rerun()


def checkpoint_dir() -> Path:
    """checkpoints/ beside app.py; CAPSVIZ_CHECKPOINTS points elsewhere (tests, shared folders)."""
    return Path(os.environ.get("CAPSVIZ_CHECKPOINTS", ROOT / "checkpoints"))


def public(message) -> str:
    """A message as a browser may show it: checkpoints named by their name in the model folder,
    never by the server's path to it (given, absolute or through a symlink)."""
    text = str(message)
    folder = checkpoint_dir()
    prefixes = sorted({str(folder), str(folder.absolute()), str(folder.resolve())}, key=len, reverse=True)
    for prefix in prefixes:
        text = text.replace(prefix + os.sep, "")
    for prefix in prefixes:
        text = text.replace(prefix, "the model folder")
    return text


TRACE_TEXTS = ("name", "x", "y", "text", "hovertext", "labels", "customdata")  # a chart trace's values that Plotly shows as text


def plain_chart(fig):
    """`fig` (a Plotly figure) with every text in it made plain for Plotly, which reads a few
    HTML tags, links among them: titles, axis and legend names, categories, tick and hover text,
    annotations. capsviz's charts use no markup of their own. Returns `fig`."""
    for trace in fig.data:
        for attr in TRACE_TEXTS:
            if attr in trace and trace[attr] is not None:
                trace[attr] = plain_nested(trace[attr])
    layout = fig.layout
    if layout.title.text:
        layout.title.text = plain_nested(layout.title.text)
    for axis in [*fig.select_xaxes(), *fig.select_yaxes()]:
        if axis.title.text:
            axis.title.text = plain_nested(axis.title.text)
        if axis.ticktext:
            axis.ticktext = plain_nested(list(axis.ticktext))
    for note in layout.annotations:
        note.text = plain_nested(note.text)
    if layout.legend.title.text:
        layout.legend.title.text = plain_nested(layout.legend.title.text)
    return fig


def plain_nested(value):
    """Every text in `value` (a text, an array, or lists at any depth: a chart's names, categories
    and hover data) made plain for Plotly; numbers as they were."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "OUS":
            return value
        value = value.tolist()
    if isinstance(value, str):
        return plain(value, "chart")
    if isinstance(value, list | tuple):
        return [plain_nested(v) for v in value]
    return value


def said_rows(rows: list, studies=()) -> tuple[list, list]:
    """The lab's rows and seed studies with their names (model, architecture) made plain, for
    the sentences that lab.sentences writes in Markdown about them."""
    from dataclasses import replace

    rows = [replace(r, model=plain(r.model), extra={k: plain(v) if k == "architecture" else v for k, v in r.extra.items()}) for r in rows]
    return rows, [replace(s, architecture=plain(s.architecture)) for s in studies]


def guard_clear_cache() -> None:
    """Let only the teacher's sessions clear the server's caches. Streamlit clears every cache of
    the process for a "clear cache" message from any browser (the menu, the C key, or a script
    sending it in a loop), making every student's models and test sets load again (Streamlit 1.67:
    AppSession._handle_clear_cache_request); a student's message is ignored."""
    from streamlit.runtime.app_session import AppSession

    original = getattr(AppSession, "_handle_clear_cache_request", None)
    if original is None or getattr(original, "capsviz_guard", False):
        return

    def handle(session) -> None:
        try:
            teacher = session._session_state[STATE.teacher.key] is True
        except (KeyError, AttributeError, TypeError):
            teacher = False
        if teacher:
            original(session)

    handle.capsviz_guard = True
    AppSession._handle_clear_cache_request = handle


guard_clear_cache()
serving_threads()
_teachers: set[str] = set()  # the students' ids that have entered the teacher key in this process
TURNS = access.Turns()  # a student's page runs in this process, one at a time (app.py)


def address() -> str:
    """This browser's address (capsviz.access.client_address): new identities and key guesses are counted by it."""
    peer = st.context.ip_address
    peer = peer if isinstance(peer, str) else None  # None: loopback (and Streamlit's AppTest, which has no connection)
    return access.client_address(peer, st.context.headers.get_all("X-Forwarded-For"))


def person() -> tuple[str, bool]:
    """(this browser's id, whether it is the teacher's) for this run (capsviz.access): the id the
    server signed into its cookie, the same in every tab and after a reload; where the browser
    brought none (or one the server did not sign), a new one, minted once for the session and
    kept in its cookie (`keep_identity`). The teacher: on the server's own machine, or with the key."""
    folder = checkpoint_dir()
    where = address()
    who = access.identity(folder, st.context.cookies)
    if who is None:
        who = STATE.session_id.get()
        if not who:
            who, cookie = access.mint(folder, where)
            STATE.session_id.set(who)
            STATE.id_cookie.set(cookie or "")
    teacher = where == access.LOCAL or who in _teachers
    STATE.teacher.set(teacher)  # read by the clear-cache guard
    return who, teacher


def keep_identity() -> None:
    """Once a session: put its newly minted, signed identity in the browser's cookie, so its
    other tabs and its reloads are the same student (no cookie for an address's shared identity)."""
    cookie = STATE.id_cookie.pop("")
    if cookie:
        st.html(
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
    if tried == "teacher":
        _teachers.add(person()[0])
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


ALL = N_("all datasets")  # the dataset filter's first choice (a value, translated where shown)


def checkpoints() -> list[tuple[Path, CheckpointMeta]]:
    """Readable checkpoints in checkpoints/ (fresh every run: a model trained in this session shows up
    at once), MNIST models first: the first is the default active model, and MNIST is where a newcomer starts."""
    found = [(p, m) for p, m in list_checkpoints(checkpoint_dir()) if isinstance(m, CheckpointMeta)]
    return sorted(found, key=lambda pm: (pm[1].dataset != "mnist", pm[0].name))


@st.cache_resource(show_spinner=False)
def models() -> ModelCache:
    """The server's one cache of loaded models, shared by every session (capsviz.model_cache)."""
    return ModelCache()


def load_model(path: Path):
    """(model, meta) of a checkpoint, loaded once per version of the file for every session."""
    torch.set_grad_enabled(False)  # this session's thread: pages only infer
    cache = models()
    if cache.holds(path):
        return cache.get(path)
    with st.spinner(t("Loading model ...")):
        return cache.get(path)


def model_key(path: Path) -> str:
    """What keys a page's cached results for the model in `path`: a retrained file is a new model."""
    return f"{path}:{path.stat().st_mtime}"


_FOR_IMAGE: dict[str, object] = {}  # the core functions `for_image` has been asked for, by name


@st.cache_data(max_entries=512, show_spinner=False)
def _for_image(name: str, key: str, lang: str, _model, image_bytes: bytes, shape: tuple, args: tuple):  # _model: the one `key` names
    with speaking(lang):  # the words a result holds are in the language it is kept for
        return _FOR_IMAGE[name](_model, np.frombuffer(image_bytes, np.float32).reshape(shape), *args)


def for_image(fn, model, image: np.ndarray, *args, key: str | None = None):
    """fn(model, image, *args) for a core function `fn` (capsviz.analysis: a prediction, a routing
    trace, a tour, a segmentation), computed once for every session that asks for it with this
    model and this image: a class following one link asks for the same ones. `key` names the model
    (`model_key`; by default the page's active model); `args` must be hashable. A result is kept
    per language too: the words it holds are the session's."""
    name = f"{fn.__module__}.{fn.__qualname__}"
    _FOR_IMAGE.setdefault(name, fn)
    image = np.asarray(image, np.float32)
    return _for_image(name, key or STATE.model_key.get(), language(), model, image.tobytes(), image.shape, args)


def answer(key: str, model, image: np.ndarray):
    """The model's answer for an image (capsviz.analysis.predict), cached as `for_image` caches."""
    return for_image(predict, model, image, key=key)


def active_name() -> str | None:
    """The active checkpoint's file name: the sidebar's pick, else the link's ?model=, else the first
    (among the models of the dataset chosen in the sidebar)."""
    dataset = STATE.dataset_pick.get()
    names = [p.name for p, m in checkpoints() if dataset == ALL or m.dataset == dataset]
    for cand in (STATE.pending_model.get(None), STATE.model_pick.get(None), st.query_params.get("model")):
        if cand in names:
            return cand
    return names[0] if names else None


def active_model():
    """(model, meta, path) for the active model, or None after telling the user why."""
    name = active_name()
    if name is None:
        st.info(
            t(
                "No model is available yet. Train one on the **Train** page, or from a terminal: "
                "`python -m capsviz train --model capsnet-small --out checkpoints/capsnet-small.safetensors`."
            )
        )
        return None
    st.query_params["model"] = name
    path = str(checkpoint_dir() / name)
    try:
        model, meta = load_model(Path(path))
        STATE.model_key.set(model_key(Path(path)))
    except (CapsvizError, OSError) as e:
        st.error(t("Cannot load {name}: {why}", name=plain(Path(path).name), why=plain(public(e))))
        return None
    return model, meta, Path(path)


def page_model(fits, needs: str, why: str, choose=None):
    """(model, meta, path) for this page: the active model when `fits(meta)`; else a model from the
    folder that fits (the same dataset's first, or `choose(meta, suitable)`'s pick, which returns
    ((path, meta), a sentence on why)), named at the top of the page with a button to make
    it the active model everywhere; else the page explains `why` ({name} and {family} filled in)
    and stops ({family}: `family_words`). `needs` says in a few words what the page needs."""
    loaded = active_model()
    if loaded is None:
        st.stop()
    model, meta, path = loaded
    if fits(meta):
        return loaded
    suitable = sorted(((p, m) for p, m in checkpoints() if fits(m)), key=lambda pm: (pm[1].dataset != meta.dataset, pm[0].name))
    if not suitable:
        st.info(why.format(name=plain(path.stem), family=family_words(meta.family)))  # plain: the name is made plain
        st.stop()
    (stand, stand_meta), picked = suitable[0], ""
    if choose is not None:
        (stand, stand_meta), picked = choose(meta, suitable)
    try:
        model, meta2 = load_model(stand)
    except (CapsvizError, OSError) as e:
        st.error(t("Cannot load {name}: {why}", name=plain(stand.name), why=plain(public(e))))
        st.stop()
    words = dict(name=plain(path.stem), family=family_words(meta.family), needs=needs, shown=plain(stand.stem))
    if stand_meta.dataset == meta.dataset:
        said = t("**{name}**, the model in the sidebar, is {family}; this page needs {needs}, so it shows **{shown}**.", **words)
    else:
        said = t(
            "**{name}**, the model in the sidebar, is {family}; this page needs {needs}, so it shows **{shown}** (trained on {dataset}).",
            dataset=plain(stand_meta.dataset),
            **words,
        )
    st.info(said + (f" {plain(picked)}" if picked else ""), icon=":material/swap_horiz:")
    if st.button(t("Use {name} on every page", name=plain(stand.stem)), key=f"switch_{stand.stem}"):
        STATE.pending_model.set(stand.name)  # the sidebar switches its dataset filter if needed
        st.rerun()
    STATE.model_key.set(model_key(stand))  # traces are cached per model shown
    return model, meta2, stand


_TEST_SETS_READ: set[tuple] = set()  # the test sets this process has read (a spinner says so while one is read)


@st.cache_resource(show_spinner=False)
def _test_set(dataset: str, size: int | None, channels: int, where: str | None):  # `where` keys the cache by data folder
    return model_test_set(dataset, size, channels)


def test_set(dataset: str, size: int | None = None, channels: int = 1, quiet: bool = False):
    """The test split a model of size x size inputs with `channels` channels was tested on (a
    user's images read at that size: capsviz.data.model_test_set), or None after showing
    exactly how to get it (`quiet`: without, where the page has said so once already)."""
    asked = (dataset, size, channels, os.environ.get("CAPSVIZ_DATA_DIR"))
    try:
        if asked in _TEST_SETS_READ:
            return _test_set(*asked)
        with st.spinner(t("Loading test images ...")):  # the server's first read of this test set
            found = _test_set(*asked)
        _TEST_SETS_READ.add(asked)
        return found
    except CapsvizError as e:
        if quiet:
            return None
        if user_dataset(dataset):
            name = short_name(dataset)
            why = str(e).replace(dataset, name).replace(user_dataset(dataset)[1], name)  # the server's paths are its own
            st.warning(
                t(
                    "The images this model was trained on ({name}) are not available on this server, so this page can only "
                    "use a picture you upload or draw. ({why}.)",
                    name=plain(name),
                    why=plain(why),
                ),
                icon=":material/image_not_supported:",
            )
            return None
        st.warning(t("The {dataset} test images are not available, so this page can only use uploaded images.", dataset=plain(dataset)))
        with st.expander(t("How to get the data"), expanded=True):
            st.code(str(e), language=None, wrap_lines=True)
            st.markdown(
                t("Run `python -m capsviz data --download`, or set `CAPSVIZ_DATA_DIR` to a folder with the IDX files, then reload.")
            )
        return None


def sidebar(page: str = "") -> tuple[str, bool]:
    """The active model and the status line; `page` is the page about to run. On a page change the
    test image picked on the last page is handed to this one (each page has its own widget).
    Returns `person()`'s (id, teacher), read once for the run."""
    if STATE.page_now.get(page) != page and STATE.image_index.present:
        STATE.image_pending.set(STATE.image_index.get())
    STATE.page_now.set(page)
    read_link()  # the link this session opened with, once
    teacher_key_entry()
    who, teacher = person()
    keep_identity()
    seen(who, f"tour:{STATE.tour_step.get()}" if page in ("tour", "home") else page, teacher)
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
        STATE.site_slot.set((page, st.empty()))  # filled by `site_button` once the page has put its view in the address
    class_panel(teacher)
    link_notice(STATE.model_pick.get(None))
    return who, teacher


def site_button(page: str, meta) -> None:
    """At the end of a page the static site also has: a link to the site's view of the same model,
    image and settings, when the host names one ($CAPSVIZ_SITE_URL) and the site can run the model."""
    url = site_link(page, st.query_params.to_dict(), meta is not None and runs_in_site(meta.config))
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


MISTAKES_SCAN = 2000

# A drawing pad: white ink on black, 280x280, sent to Python as 28x28 grey levels on each stroke's end.
_PAD_JS = """
export default function (component) {
  const { parentElement, setStateValue } = component;
  const canvas = parentElement.querySelector("canvas");
  const clear = parentElement.querySelector("button");
  const ctx = canvas.getContext("2d");
  const small = document.createElement("canvas");
  small.width = small.height = 28;
  const sctx = small.getContext("2d");
  const wipe = () => { ctx.fillStyle = "black"; ctx.fillRect(0, 0, canvas.width, canvas.height); };
  if (!canvas.dataset.ready) { wipe(); canvas.dataset.ready = "1"; }
  ctx.lineWidth = 22; ctx.lineCap = "round"; ctx.lineJoin = "round"; ctx.strokeStyle = "white";
  let drawing = false;
  const at = (e) => { const r = canvas.getBoundingClientRect(); return [(e.clientX - r.left) * canvas.width / r.width, (e.clientY - r.top) * canvas.height / r.height]; };
  const send = () => {
    sctx.imageSmoothingEnabled = true;
    sctx.clearRect(0, 0, 28, 28);
    sctx.drawImage(canvas, 0, 0, 28, 28);
    const rgba = sctx.getImageData(0, 0, 28, 28).data;
    const grey = [];
    for (let i = 0; i < rgba.length; i += 4) grey.push(rgba[i]);
    setStateValue("pixels", grey);
  };
  canvas.onpointerdown = (e) => { drawing = true; canvas.setPointerCapture(e.pointerId); const [x, y] = at(e); ctx.beginPath(); ctx.moveTo(x, y); ctx.lineTo(x, y); ctx.stroke(); };
  canvas.onpointermove = (e) => { if (!drawing) return; const [x, y] = at(e); ctx.lineTo(x, y); ctx.stroke(); };
  canvas.onpointerup = () => { if (drawing) { drawing = false; send(); } };
  clear.onclick = () => { wipe(); send(); };
}
"""
_pad = st.components.v2.component(
    "capsviz.drawing_pad",
    html='<canvas width="280" height="280" style="border:1px solid #888;touch-action:none;cursor:crosshair" aria-label="drawing pad"></canvas><br><button type="button">Clear</button>',
    js=_PAD_JS,
)


def drawn_image() -> np.ndarray | None:
    """The pad's drawing as (28, 28) float in [0, 1], or None before anything is drawn."""
    result = _pad(key="drawing_pad", on_pixels_change=lambda: None)
    pixels = getattr(result, "pixels", None)
    if not pixels or len(pixels) != 784:
        return None
    a = np.asarray(pixels, dtype=np.float32).reshape(28, 28) / 255.0
    return mnist_style(a) if a.max() > 0 else None


# 16 native range inputs: each key press or release sends all 16 values at once, with no
# debounce, so only the explorer's fragment reruns (st.slider waits ~200 ms in its frontend first).
_DIMS_HTML = '<div class="dims" role="group" aria-label="DigitCaps dimensions"></div><button type="button">Reset all to 0</button>'
_DIMS_CSS = """
.dims { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 0.35rem 1.5rem; margin-bottom: 0.6rem; }
.dims label { display: flex; align-items: center; gap: 0.5rem; min-width: 0; font: 0.85rem sans-serif; }
.dims span { width: 2rem; }
.dims input { flex: 1; min-width: 0; accent-color: #ff4b4b; }
.dims output { width: 3rem; font-variant-numeric: tabular-nums; text-align: right; }
button { font: 0.9rem sans-serif; padding: 0.3rem 0.8rem; border: 1px solid #ccc; border-radius: 0.5rem; background: white; cursor: pointer; }
"""
_DIMS_JS = """
export default function (component) {
  const { parentElement, data, setStateValue } = component;
  const root = parentElement.querySelector(".dims");
  const fmt = (v) => (v > 0 ? "+" : v < 0 ? "" : "\u00a0") + v.toFixed(2);
  if (!root.dataset.ready) {  // first mount: draw the inputs at the values Python holds
    root.dataset.ready = "1";
    root.innerHTML = data.values.map((v, d) =>
      `<label><span>d${d}</span><input type="range" min="-0.25" max="0.25" step="0.05" value="${v}" aria-label="d${d}"><output>${fmt(v)}</output></label>`
    ).join("");
  }
  const inputs = [...root.querySelectorAll("input")];
  const outputs = [...root.querySelectorAll("output")];
  const send = () => setStateValue("deltas", inputs.map((i) => Number(i.value)));
  inputs.forEach((inp, d) => {
    inp.oninput = () => { outputs[d].textContent = fmt(Number(inp.value)); };
    inp.onchange = send;
  });
  parentElement.querySelector("button").onclick = () => {
    inputs.forEach((inp, d) => { inp.value = 0; outputs[d].textContent = fmt(0); });
    send();
  };
}
"""
_dims = st.components.v2.component("capsviz.dimension_sliders", html=_DIMS_HTML, css=_DIMS_CSS, js=_DIMS_JS)


def dimension_sliders(initial: np.ndarray, key: str) -> np.ndarray:
    """16 sliders in [-0.25, 0.25], step 0.05, keyboard-friendly (arrows, Home, End), with a reset
    button; `initial` (a shared link's values) applies until the user moves one; a new `key` starts
    a fresh set. -> (16,) deltas."""
    start = [float(v) for v in initial]
    result = _dims(key=key, data={"values": start}, default={"deltas": start}, on_deltas_change=lambda: None)
    values = getattr(result, "deltas", None) or start
    return np.clip(np.round(np.asarray(values, np.float32) / 0.05) * 0.05, -0.25, 0.25).astype(np.float32) + 0.0  # + 0.0: no -0


def link_number(slot: Key, lo: float, hi: float, default: float, what: str, whole: bool = True) -> int | float | None:
    """The session's opening link's ?param= for `slot` (read once, by the first page to ask)
    brought within [lo, hi] (capsviz.analysis.links), or None when the link had none. A value the
    page cannot show as it is leaves a note for `show_link_note`."""
    got = _link(slot.param, lo, hi, default, what, whole)
    return None if got is None else got.value


def _link(param: str, lo: float, hi: float, default: float, what: str, whole: bool) -> Linked | None:
    raw = link_asks(param)
    return None if raw is None else keep_link_note(param, linked(raw, lo, hi, default, what, whole))


def keep_link_note(param: str, got: Linked) -> Linked:
    """Keep `got`'s note, if any, for `show_link_note(param, ...)`; returns `got`."""
    if got.note:
        STATE.link_notes.setdefault()[param] = (got.note, got.value)
    return got


def show_link_note(param: str, current) -> None:
    """What the link asked for ?param= and what the page shows instead, while it still shows that."""
    notes = STATE.link_notes.get()
    if param not in notes:
        return
    note, value = notes[param]
    if current != value:  # the user has moved on
        notes.pop(param)
        return
    st.info(plain(note, limit=MAX_SENTENCES), icon=":material/link_off:")


def keep_within(slot: Key, lo: float, hi: float, default: float | None = None, what: str | None = None) -> None:
    """A widget bound to the URL's ?key=: a shared link's value brought within this widget's range
    with a note (Streamlit would show its default in silence), and a value kept from another page
    or a wider range (routing and EM iterations share ?iterations=) brought within it: Streamlit
    refuses it otherwise. `default`: the widget's own, shown for a malformed link value."""
    if not slot.present:
        whole = isinstance(lo, int) and isinstance(hi, int)
        got = _link(slot.param, lo, hi, lo if default is None else default, what or slot.param, whole)
        if got is not None and got.note:
            _replace_linked(slot, got.value)
    v = slot.get(None)
    if isinstance(v, int | float) and not lo <= v <= hi:
        slot.set(type(v)(min(max(v, lo), hi)))
    show_link_note(slot.param, slot.get(None))


def _replace_linked(slot: Key, value) -> None:
    """Show `value` in the widget bound to ?key= in place of the link's: Streamlit would read some
    malformed values its own way (?right=1.5 as 1), so the address gets the value too."""
    slot.set(value)
    st.query_params[slot.param] = str(value)  # before the widget is drawn: not bound to it yet in this run


def keep_choice(slot: Key, choices, default, what: str) -> None:
    """`keep_within` for a widget bound to ?key= that offers `choices` (a select slider, a radio):
    a shared link's value none of them is replaced by `default`, with a note."""
    if not slot.present:
        raw = link_asks(slot.param)
        got = None if raw is None else keep_link_note(slot.param, chosen(raw, choices, default, what))
        if got is not None and got.note:
            _replace_linked(slot, got.value)
    show_link_note(slot.param, slot.get(None))


def link_choice(slot: Key, options, default, what: str, label=str) -> None:
    """Before a widget bound to ?key= that offers `options` (a select box, a radio, a toggle, tabs;
    the address names each by `label(option)`, the text the widget shows, and a toggle by true or
    false): a shared link's value that names none of them leaves a note saying the page shows
    `default`, as Streamlit then does in silence."""
    if not slot.present:
        raw = link_asks(slot.param)
        names = {("true" if o else "false") if isinstance(o, bool) else label(o): o for o in options}
        given = None if raw is None else raw.lower() if all(isinstance(o, bool) for o in options) else raw
        if given is not None and given != "" and given not in names:
            got = chosen(raw, list(names), next(k for k, o in names.items() if o == default), what)
            keep_link_note(slot.param, got._replace(value=default))
    show_link_note(slot.param, slot.get(default))


def link_choices(slot: Key, options, default: list, what: str, label=str) -> None:
    """`link_choice` for a multiselect bound to ?key= (its link repeats the parameter, one value
    per option): values that name no option are left out, as Streamlit leaves them, with a note."""
    shown = default  # before the widget is drawn for the first time: what it will show
    if not slot.present:
        raws = link_asks_all(slot.param)
        names = {label(o): o for o in options}
        if raws is not None and raws != [""]:
            got = several(raws, list(names), [label(o) for o in default], what)
            shown = [names[n] for n in got.value]
            keep_link_note(slot.param, got._replace(value=shown))
    show_link_note(slot.param, slot.get(shown))


def pick_image(dataset: str, names, size: int, model=None, channels: int | None = None) -> tuple[np.ndarray, str] | None:
    """The image picker every page shares: test set (index, random, by class), an upload or a
    drawing, as (H, W) or (C, H, W) in [0, 1] (capsviz.analysis) with its label. A model trained on
    a user's images gets its own test images, and uploads and drawings made its size and channels
    (`channels`: the model's, else 1). The chosen index survives page changes and lives in the URL
    (?image=: a link's index beyond the test set is brought within it, with a note)."""
    own = user_dataset(dataset) is not None
    channels = channels or (model.config.in_channels if model is not None else 1)
    data = test_set(dataset, size, channels) if own or size == 28 else None
    if data is not None and len(data) == 0:
        data = None
    STATE.image_index.setdefault()
    source = st.radio(
        t("Image"),
        [N_("Test set"), N_("Upload"), N_("Draw")],
        horizontal=True,
        key="source",
        index=1 if data is None else 0,
        format_func=keeping(t),
    )
    digits = class_words(dataset).digits
    if source == "Test set" and data is None:
        if digits:
            st.info(t("The test set is not available here (see above): upload or draw a digit instead."))
        else:
            st.info(t("The test set is not available here (see above): upload or draw a picture instead."))
        return None
    if source == "Draw":
        if size != 28 and not own:
            st.error(t("This model takes {size}x{size} inputs; drawings are 28x28.", size=size))
            return None
        if own:
            if channels == 3:
                said = t(
                    "Draw with the mouse or a finger, white on black; the model sees it at {size}x{size} in every colour channel "
                    "when you lift the pen.",
                    size=size,
                )
            else:
                said = t(
                    "Draw with the mouse or a finger, white on black; the model sees it at {size}x{size} when you lift the pen.", size=size
                )
            st.caption(said)
        else:
            st.caption(t("Draw one digit with the mouse or a finger; the models see it at 28x28 when you lift the pen."))
        image = drawn_image()
        if image is None:
            st.info(t("Draw a digit on the pad.") if digits else t("Draw a picture on the pad."))
            return None
        return (fit_drawing(image, size, channels) if own else image), "drawn"
    if source == "Test set" and data is not None:
        linked_image = link_number(STATE.image, 0, len(data) - 1, 0, "test image")  # a shared link's, once
        if linked_image is not None:
            STATE.image_pending.set(linked_image)
        if not STATE.image.present or STATE.image_pending.present:
            # seed the widget before it is drawn: after a page change, a Random or a class jump
            STATE.image.set(min(int(STATE.image_pending.pop(STATE.image_index.get())), len(data) - 1))
        STATE.image.set(min(int(STATE.image.get()), len(data) - 1))  # another model's test set may be smaller
        c1, c2, c3 = st.columns([2, 1, 2])
        c1.number_input(t("Test image index"), 0, len(data) - 1, key=STATE.image.key)
        with c1:
            show_link_note(STATE.image.param, STATE.image.get())
        if c2.button(t("Random"), key="random_image"):
            STATE.image_pending.set(int(np.random.randint(len(data))))
            st.rerun()
        if model is not None and c2.button(
            t("Misclassified"),
            key="wrong_image",
            help=t("A random test image among the first {n} that this model gets wrong", n=MISTAKES_SCAN),
        ):
            with st.spinner(t("Looking for a test image this model gets wrong ...")):
                wrong = find_mistake(model, data.images[:MISTAKES_SCAN], data.labels[:MISTAKES_SCAN], int(np.random.randint(1 << 30)))
            if wrong is not None:
                STATE.image_pending.set(wrong)
                st.rerun()
            st.toast(t("No mistakes among the first {n} test images.", n=MISTAKES_SCAN))
        pick = c3.selectbox(
            t("Jump to a test image of class"),
            ["-"] + list(names),
            key=STATE.jump_class.key,
            format_func=lambda n: n if n == "-" else plain(n),
        )
        if pick != "-":
            idx = (data.labels == list(names).index(pick)).nonzero().flatten()
            STATE.jump_class.pop()
            if len(idx):
                STATE.image_pending.set(int(idx[np.random.randint(len(idx))]))
                st.rerun()
            st.toast(t("No test image of class {name}.", name=plain(pick)))
        i = int(STATE.image.get())
        STATE.image_index.set(i)
        st.query_params["image"] = str(i)
        return image_at(data.images, i), names[int(data.labels[i])]
    if own:
        if channels == 3:
            label = t(
                "A picture (PNG or JPEG): centre-cropped to a square and made {size}x{size} colour, as the training images were", size=size
            )
        else:
            label = t(
                "A picture (PNG or JPEG): centre-cropped to a square and made {size}x{size} grey, as the training images were", size=size
            )
    else:
        label = t("A picture of a single digit (PNG or JPEG)")
    up = st.file_uploader(label, type=["png", "jpg", "jpeg"], key="upload")
    if up is not None:
        try:
            image = picture_to_input(up.getvalue(), size, channels) if own else picture_to_digit(up.getvalue())
        except CapsvizError as e:
            st.error(plain(str(e)))
            image = None
        if image is not None:
            if size != 28 and not own:
                st.error(t("This model takes {size}x{size} inputs; uploads are resized to 28x28.", size=size))
                return None
            return image, "?"
    st.info(t("Pick a test image or upload one."))
    return None


def long_job(key: str, label: str, fn, stored=None):
    """A computation worth a button (sweeps over hundreds of images). Its result is kept in the
    session per `key`; while it runs a progress bar moves and a Cancel button stops it: any click
    reruns the page, and Streamlit interrupts the loop at its next progress update. `stored()`
    gives the result kept on disk for these models and settings (capsviz.analysis.stored), if any:
    shown at once, without the button."""
    results = STATE.long_results.setdefault()
    if key in results:
        return results[key]
    kept = stored() if stored else None
    if kept is not None:
        st.caption(
            t(
                "A stored result: this sweep ran once before for these exact model files and settings (shipped with the "
                "models, or run on this machine); running it again gives the same numbers (up to an image or two where another "
                "CPU rounds differently)."
            )
        )
        return kept
    running = STATE.running(label=label)
    if running.pop() == key:
        st.info(t("{label}: cancelled before it finished. Nothing was kept.", label=plain(label)))
    if not st.button(plain(label), key=f"run_{label}", type="primary"):
        return None
    running.set(key)
    bar = st.progress(0.0, text=f"{plain(label)} ...")
    st.button(t("Cancel"), key=f"cancel_{label}")

    start = time.perf_counter()

    def progress(done: int, total: int) -> None:
        bar.progress(
            min(done / max(total, 1), 1.0), text=f"{plain(label)}: {done} / {total}{time_left(done, total, time.perf_counter() - start)}"
        )

    results[key] = fn(progress)
    running.pop()
    bar.empty()
    st.rerun()  # redraw without the Cancel button


def count_slider(label: str, choices: list[int], default: int, available: int, slot: Key, container=st) -> int:
    """How many test images (or pairs) to use: the choices up to what the test set holds (a link's
    other count is said, and the default shown)."""
    options = [c for c in choices if c < available] + [available]
    with nullcontext() if container is st else container:
        keep_choice(slot, options, min(default, available), label.lower())
    return container.select_slider(plain(label), options, value=min(default, available), key=slot.key, bind="query-params")
