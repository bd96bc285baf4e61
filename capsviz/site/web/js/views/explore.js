// The explorer: the class capsules' lengths, the reconstruction from one capsule with its 16
// dimensions on sliders, and every dimension from -0.25 to +0.25 (Fig. 4 of Sabour et al.).
import { ask, questionFor } from "../asking.js";
import { $, bars, el, labelled, named, overlay, paint } from "../draw.js";
import { argmax, fmt, lengthsAt, order, pairs, vectorAt } from "../numbers.js";
import { decode, imageSet } from "../runtime.js";
import { truthWaitsForAnswer } from "./input.js";
import { iterationsShown, shown, site, state } from "../store.js";
import { say, sentences } from "../words.js";

const STEPS = [-0.25, -0.2, -0.15, -0.1, -0.05, 0, 0.05, 0.1, 0.15, 0.2, 0.25]; // the sliders' values
let gridKey = null;
let redrawView = null; // the page's render, which the question's Commit and Skip call (controls)

export async function render() {
  const m = site.model;
  const current = shown.current;
  // predict, then see: the app's question first, the answer (everything below it) once answered
  const own = current.rule === m.routing && iterationsShown() === (site.manifest.routings[m.routing].iterative ? m.iterations : 1);
  const q = await questionFor(m, own);
  const open = q ? ask($("ask"), q, () => redrawView()) : true;
  if (!q) $("ask").hidden = true;
  truthWaitsForAnswer(!open);
  $("explore-body").hidden = !open;
  if (!open) return;
  const lengths = lengthsAt(current, iterationsShown());
  const best = argmax(lengths);
  const winners = order(lengths).slice(0, m.digits); // a MultiMNIST model answers with its two longest
  const [a, b] = winners;
  $("explore-note").textContent = say(m.digits === 2 ? "explore_note_two" : "explore_note");
  const title =
    m.digits === 2
      ? say("explore_two_longest", { first: m.classes[a], first_length: fmt(lengths[a]), second: m.classes[b], second_length: fmt(lengths[b]) })
      : say("explore_longest", { name: m.classes[best], length: fmt(lengths[best]) });
  bars(
    $("lengths"),
    {
      title,
      xTitle: say("axis_class"),
      yTitle: say("axis_length"),
      labels: m.classes,
      values: Array.from(lengths),
      colours: m.classes.map((_, j) => (winners.includes(j) ? "#0072B2" : "#9aa5b1")),
      text: Array.from(lengths, (v) => fmt(v)),
      hover: m.classes.map((name, j) => `${name}: ${say("word_length")} ${fmt(lengths[j], 3)}`),
      yRange: [0, 1.1],
    },
    say("aria_lengths", { title, values: pairs(m.classes, lengths) }),
  );
  $("pair").hidden = m.digits !== 2;
  if (m.digits === 2) await drawPair(lengths);
  const pick = $("capsule");
  if (state.capsule === null || state.capsule >= m.classes.length) state.capsule = best;
  pick.replaceChildren(...m.classes.map((name, j) => el("option", { value: String(j) }, say("option_length", { name, length: fmt(lengths[j]) }))));
  pick.value = String(state.capsule);
  const key = `${m.name}|${state.image}|${state.drawn ? "drawn" : ""}|${state.capsule}|${current.rule}|${state.iterations}`;
  if (key !== gridKey || state.drawn) {
    gridKey = key;
    const own = await drawGrid(); // its middle column is the capsule's own reconstruction: not decoded again
    if (state.dims.some((v) => v !== 0)) await redraw();
    else showReconstruction(own);
  } else {
    await redraw();
  }
}

// A MultiMNIST model's answer, its two longest capsules, and each one's reconstruction alone: red and green
async function drawPair(lengths) {
  const m = site.model;
  const S = m.in_size;
  const [a, b] = order(lengths).slice(0, 2);
  const T = iterationsShown();
  const vectors = new Float32Array(2 * m.dim);
  vectors.set(vectorAt(shown.current, T, a), 0);
  vectors.set(vectorAt(shown.current, T, b), m.dim);
  const rec = await decode(m, vectors, [a, b]);
  const [red, green] = [rec.subarray(0, S * S), rec.subarray(S * S, 2 * S * S)];
  shown.current.pair = { winners: [a, b], reconstructions: rec };
  const [first, second, firstLength, secondLength] = [m.classes[a], m.classes[b], fmt(lengths[a]), fmt(lengths[b])];
  const set = await imageSet(m.images);
  const [one, two] = set.labels[state.image].map((j) => m.classes[j]);
  const truth = say("pair_truth", { first: one, second: two });
  const said = state.drawn
    ? say("pair_drawn", { first, second, first_length: firstLength, second_length: secondLength })
    : say("pair_winners", { first, second, first_length: firstLength, second_length: secondLength, truth });
  $("pair-note").textContent = sentences(said, say("pair_overlay", { first, second }));
  paint(named($("pair-input"), say("aria_pair_input")), shown.current.pixels, S);
  paint(named($("pair-first"), say("aria_pair_one", { name: m.classes[a] })), red, S);
  paint(named($("pair-second"), say("aria_pair_one", { name: m.classes[b] })), green, S);
  overlay(named($("pair-overlay"), say("aria_pair_both", { first: m.classes[a], second: m.classes[b] })), red, green, S);
  $("pair-first-name").textContent = say("pair_from_red", { name: m.classes[a] });
  $("pair-second-name").textContent = say("pair_from_green", { name: m.classes[b] });
}

// the reconstruction from the chosen capsule with the sliders' changes: a slider move runs this alone
export async function redraw() {
  const m = site.model;
  const vector = vectorAt(shown.current, iterationsShown(), state.capsule).map((x, d) => x + state.dims[d]);
  showReconstruction(await decode(m, vector, [state.capsule]));
}

// the reconstruction `rec` of the chosen capsule with the sliders' changes, and the sliders
function showReconstruction(rec) {
  const m = site.model;
  paint($("reconstruction"), rec, m.in_size, m.channels);
  const changed = Array.from(state.dims, (v, d) => (v ? `d${d} ${v > 0 ? "+" : ""}${fmt(v)}` : null)).filter(Boolean);
  const name = m.classes[state.capsule];
  named($("reconstruction"), changed.length ? say("aria_reconstruction", { name, changes: changed.join(", ") }) : say("aria_reconstruction_plain", { name }));
  shown.current.reconstruction = rec;
  for (let d = 0; d < 16; d++) {
    const input = $(`dim${d}`);
    if (input) {
      input.value = String(state.dims[d]);
      $(`dim${d}-out`).textContent = (state.dims[d] >= 0 ? "+" : "") + fmt(state.dims[d]);
    }
  }
}

// Every dimension from -0.25 to +0.25: one decoder run of the capsule's own vector (the middle column
// of every row, decoded once) and each dimension's changes. -> the own vector's reconstruction
async function drawGrid() {
  const m = site.model;
  const D = m.dim;
  const base = vectorAt(shown.current, iterationsShown(), state.capsule);
  const changed = STEPS.filter((x) => x !== 0);
  const vectors = new Float32Array((1 + D * changed.length) * D);
  vectors.set(base);
  for (let d = 0; d < D; d++) {
    changed.forEach((x, k) => {
      const row = vectors.subarray((1 + d * changed.length + k) * D, (2 + d * changed.length + k) * D);
      row.set(base);
      row[d] += x;
    });
  }
  const decoded = await decode(m, vectors, new Array(1 + D * changed.length).fill(state.capsule));
  const S = m.in_size;
  const C = m.channels;
  const one = C * S * S;
  // the grid's cell n (row d, column k) as the decoder wrote it: the own vector's for every step 0
  const rec = new Float32Array(D * STEPS.length * one);
  for (let n = 0; n < D * STEPS.length; n++) {
    const [d, k] = [Math.floor(n / STEPS.length), n % STEPS.length];
    const at = STEPS[k] === 0 ? 0 : 1 + d * changed.length + changed.indexOf(STEPS[k]);
    rec.set(decoded.subarray(at * one, (at + 1) * one), n * one);
  }
  const canvas = $("grid");
  canvas.width = STEPS.length * S;
  canvas.height = D * S;
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(canvas.width, canvas.height);
  for (let n = 0; n < D * STEPS.length; n++) {
    const gy = Math.floor(n / STEPS.length) * S;
    const gx = (n % STEPS.length) * S;
    for (let p = 0; p < S * S; p++) {
      const o = 4 * ((gy + Math.floor(p / S)) * canvas.width + gx + (p % S));
      for (let ch = 0; ch < 3; ch++) img.data[o + ch] = Math.round(255 * rec[n * C * S * S + (C === 3 ? ch * S * S : 0) + p]);
      img.data[o + 3] = 255;
    }
  }
  ctx.putImageData(img, 0, 0);
  const steps = STEPS.map((x) => (x > 0 ? "+" : "") + String(x).replace("0.", "."));
  labelled($("grid-box"), canvas, Array.from({ length: D }, (_, d) => `d${d}`), steps, "");
  named(canvas, say("aria_grid", { name: m.classes[state.capsule], count: D }));
  return decoded.slice(0, one);
}

// app: {render, writeAddress} of site.js
export function controls(app) {
  redrawView = app.render;
  $("capsule").addEventListener("change", () => {
    state.capsule = Number($("capsule").value);
    state.dims.fill(0);
    app.render();
  });
  const dims = $("dims");
  for (let d = 0; d < 16; d++) {
    const input = el("input", { type: "range", id: `dim${d}`, min: "-0.25", max: "0.25", step: "0.05", value: "0", "aria-label": say("aria_dimension", { d }) });
    input.addEventListener("input", () => {
      state.dims[d] = Number(input.value);
      const t0 = performance.now();
      redraw().then(() => {
        app.writeAddress();
        shown.timings.slider.push(performance.now() - t0);
      });
    });
    dims.append(el("label", {}, el("span", { class: "dim-name" }, `d${d}`), input, el("output", { id: `dim${d}-out` }, "+0.00")));
  }
  $("reset").addEventListener("click", () => {
    state.dims.fill(0);
    redraw().then(app.writeAddress);
  });
}
