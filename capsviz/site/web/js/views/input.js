// The input panel: a test image or the student's drawing, which every model view computes from.
import { $, paint } from "../draw.js";
import { imageSet, testImage } from "../runtime.js";
import { site, state } from "../store.js";
import { say } from "../words.js";

export function currentPixels(set) {
  return state.drawn || testImage(site.model, set, state.image);
}

let shownSet = null; // the image set of the input shown
let truthWaits = false; // the explorer asks which class before it reveals: the image's class waits too

// the input drawn, with what it is
export function showInput(set, pixels) {
  const m = site.model;
  paint($("sketch"), pixels, m.in_size, m.channels);
  shownSet = set;
  sayWhat();
}

// whether the test image's class waits for the student's answer (the explorer's question is open)
export function truthWaitsForAnswer(waits) {
  truthWaits = waits;
  sayWhat();
}

function sayWhat() {
  const m = site.model;
  if (state.drawn || !shownSet) return;
  const truth = shownSet.labels[state.image]; // a class, or a MultiMNIST image's two (the pair's question asks how many the model names)
  if (Array.isArray(truth)) {
    $("label").textContent = say("input_test_pair", { index: state.image, count: shownSet.count, first: m.classes[truth[0]], second: m.classes[truth[1]] });
  } else if (truthWaits) {
    $("label").textContent = say("input_test_image_waits", { index: state.image, count: shownSet.count });
  } else {
    $("label").textContent = say("input_test_image", { index: state.image, count: shownSet.count, name: m.classes[truth] });
  }
}

export function startDrawing() {
  const m = site.model;
  state.drawn = new Float32Array(m.in_size * m.in_size);
  paint($("sketch"), state.drawn, m.in_size);
  $("label").textContent = say("input_drawing");
}

// app: {refresh} of site.js, run when the input changes
export function controls(app) {
  const setImage = (i) => {
    imageSet(site.model.images).then((s) => {
      state.image = Math.min(Math.max(i, 0), s.count - 1);
      state.drawn = null;
      state.capsule = null;
      state.dims.fill(0);
      $("image").value = String(state.image);
      app.refresh();
    });
  };
  $("prev").addEventListener("click", () => setImage(state.image - 1));
  $("next").addEventListener("click", () => setImage(state.image + 1));
  $("image").addEventListener("change", () => setImage(Math.round(Number($("image").value) || 0)));
  $("draw").addEventListener("click", () => startDrawing());
  $("clear").addEventListener("click", () => {
    startDrawing();
    app.refresh();
  });
  const canvas = $("sketch");
  let down = false;
  const brush = (ev) => {
    const S = site.model.in_size;
    const box = canvas.getBoundingClientRect();
    const x = ((ev.clientX - box.left) / box.width) * S;
    const y = ((ev.clientY - box.top) / box.height) * S;
    const px = state.drawn;
    for (let r = Math.floor(y - 2); r <= y + 2; r++) {
      for (let c = Math.floor(x - 2); c <= x + 2; c++) {
        if (r < 0 || c < 0 || r >= S || c >= S) continue;
        const d2 = (r + 0.5 - y) ** 2 + (c + 0.5 - x) ** 2;
        px[r * S + c] = Math.max(px[r * S + c], Math.min(1, 1.6 * Math.exp(-d2 / 1.2)));
      }
    }
    paint(canvas, px, S);
  };
  canvas.addEventListener("pointerdown", (ev) => {
    if (!state.drawn) startDrawing();
    down = true;
    canvas.setPointerCapture(ev.pointerId);
    brush(ev);
  });
  canvas.addEventListener("pointermove", (ev) => down && brush(ev));
  const lift = () => {
    if (!down) return;
    down = false;
    app.refresh();
  };
  canvas.addEventListener("pointerup", lift);
  canvas.addEventListener("pointercancel", lift);
}
