"""The inputs pages share: the image picker (test set, upload, drawing pad), the dimension sliders,
long computations behind a button with progress, and the count of test images."""

from __future__ import annotations

import time
from contextlib import nullcontext

import numpy as np
import streamlit as st

from capsviz.analysis import find_mistake, image_at
from capsviz.config import user_dataset
from capsviz.data.transforms import fit_drawing, mnist_style, picture_to_digit, picture_to_input
from capsviz.errors import CapsvizError
from capsviz.glossary import class_words
from capsviz.i18n import N_, keeping, t
from capsviz.progress import progress_words
from capsviz.text import plain
from pages.active import test_set
from pages.classroom import SEATS
from pages.linking import keep_choice, link_number, show_link_note
from pages.state import STATE, Key

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
_DIMS_HTML = '<div class="dims" role="group"></div><button type="button"></button>'


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
  const reset = parentElement.querySelector("button");
  root.setAttribute("aria-label", data.label);  // the words in the reader's language, from Python
  reset.textContent = data.reset;
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
  reset.onclick = () => {
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
    data = {"values": start, "reset": t("Reset all to 0"), "label": t("DigitCaps dimensions")}
    result = _dims(key=key, data=data, default={"deltas": start}, on_deltas_change=lambda: None)
    values = getattr(result, "deltas", None) or start
    return np.clip(np.round(np.asarray(values, np.float32) / 0.05) * 0.05, -0.25, 0.25).astype(np.float32) + 0.0  # + 0.0: no -0


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
        linked_image = link_number(STATE.image, 0, len(data) - 1, 0, t("test image"))  # a shared link's, once
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
        text = progress_words(plain(label), done, total, time.perf_counter() - start)
        bar.progress(min(done / max(total, 1), 1.0), text=text)  # plain: the label made plain above, the rest numbers

    with SEATS.away():  # minutes of work: the class's other page runs go on meanwhile
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
