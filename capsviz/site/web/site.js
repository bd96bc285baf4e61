// capsviz's static site: the core views, the models computing in the browser with onnxruntime-web.
// Every number comes from the ONNX graphs that `capsviz site` exported from the PyTorch code; this
// file only feeds them, lays their outputs out and keeps the view in the address.
import * as ort from "./vendor/ort.wasm.min.mjs";

ort.env.wasm.numThreads = 1; // a plain static host gives no cross-origin isolation, so no threads
ort.env.wasm.wasmPaths = new URL("vendor/", import.meta.url).href;

const STEPS = [-0.25, -0.2, -0.15, -0.1, -0.05, 0, 0.05, 0.1, 0.15, 0.2, 0.25]; // the explorer's slider values
const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const VIEWS = ["explore", "routing", "tour", "playground"];
// Okabe-Ito's blue, orange and purple, darkened to 4.5:1 on the page (site.css): told apart without red/green
const UPPER_COLOURS = ["var(--upper1)", "var(--upper2)", "var(--upper3)"];
const VIEW_NAMES = { explore: "the Explorer", routing: "the Routing view", tour: "the guided tour", playground: "the Playground" };

// ---------- the address: the same parameter names as the app's ----------
// every parameter the site reads; a link's other ones are named in a note, not silently dropped
const KNOWN = ["view", "embed", "model", "image", "capsule", "dims", "iterations", "t", "step", "routing", "preset", "J", "T", "cap", "rule", "pts"];

function quoted(raw) {
  return raw.length > 24 ? `${raw.slice(0, 24)}...` : raw;
}

// a link that asks for what the site does not have: what it asked and what is shown instead
function odd(name, raw, shown) {
  note(`The link asks for ${name}=${quoted(raw)}, which this site does not have; it shows ${shown} instead.`);
}

function intParam(name, lo, hi, fallback, shown = String(fallback)) {
  const raw = params.get(name);
  if (raw === null) return fallback;
  const n = Number(raw);
  if (raw.trim() === "" || !Number.isInteger(n) || n < lo || n > hi) {
    note(`The link asks for ${name}=${quoted(raw)}, not a whole number from ${lo} to ${hi}; it shows ${shown} instead.`);
    return fallback;
  }
  return n;
}

function choice(name, allowed, fallback, shown) {
  const raw = params.get(name);
  if (raw === null) return fallback;
  if (allowed.includes(raw)) return raw;
  odd(name, raw, shown);
  return fallback;
}

const notes = [];
function note(text) {
  notes.push(text);
}

const state = {
  view: choice("view", VIEWS, "explore", VIEW_NAMES.explore),
  embed: choice("embed", ["1", "0"], "0", "the full page") === "1",
  model: params.get("model"),
  image: 0,
  drawn: null, // Float32Array of a drawing, or null for a test image
  capsule: null,
  dims: new Float32Array(16),
  iterations: null,
  t: null,
  step: 1,
  // Efficient-CapsNet's capsules routed by agreement instead of its own self-attention
  rule: choice("routing", ["dynamic", "self-attention"], null, "each model's own routing") === "dynamic" ? "dynamic" : null,
  toy: {
    preset: params.get("preset"),
    J: Number(choice("J", ["2", "3"], "3", "3 upper capsules")),
    T: 3,
    cap: 1,
    rule: choice("rule", ["dynamic", "self-attention"], "dynamic", "routing by agreement"),
    pts: null,
  },
};
for (const [k, v] of params) if (!KNOWN.includes(k)) note(`The link's ${quoted(k)}=${quoted(v)} is not a setting this site has; it was left out.`);

function writeAddress() {
  const q = new URLSearchParams();
  q.set("view", state.view);
  q.set("model", site.model.name);
  if (state.drawn === null) q.set("image", String(state.image));
  if (state.capsule !== null) q.set("capsule", String(state.capsule));
  if (state.dims.some((v) => v !== 0)) q.set("dims", Array.from(state.dims, (v) => +v.toFixed(2)).join(","));
  if (current && current.rule === "dynamic") {
    q.set("iterations", String(state.iterations));
    q.set("t", String(state.t));
  }
  q.set("step", String(state.step));
  if (state.rule === "dynamic") q.set("routing", "dynamic");
  if (state.view === "playground") {
    q.set("preset", state.toy.preset);
    q.set("J", String(state.toy.J));
    q.set("T", String(state.toy.T));
    q.set("cap", String(state.toy.cap));
    q.set("rule", state.toy.rule);
    if (state.toy.pts) q.set("pts", state.toy.pts.map((x) => +x.toFixed(1)).join("_"));
  }
  if (state.embed) q.set("embed", "1");
  history.replaceState(null, "", `?${q}`);
}

// ---------- the models ----------
const site = { manifest: null, model: null, sessions: new Map(), images: new Map() };

// What went wrong, kept apart from the runtime's own words (those go to the console, never the page).
// kind: "offline" (could not be downloaded), "missing" (the host has no such file), "damaged" (not usable)
class SiteError extends Error {
  constructor(kind, url, cause) {
    super(`${kind}: ${url}`, { cause });
    this.kind = kind;
    this.url = url;
  }
}

const used = new Set(); // every file the page has downloaded: kept for offline use (keepOffline)

async function bytes(url) {
  let r;
  try {
    r = await fetch(url);
  } catch (e) {
    throw new SiteError("offline", url, e);
  }
  if (!r.ok) throw new SiteError(r.status === 404 ? "missing" : "offline", url, `HTTP ${r.status}`);
  try {
    const got = new Uint8Array(await r.arrayBuffer());
    used.add(url);
    return got;
  } catch (e) {
    throw new SiteError("offline", url, e);
  }
}

// A gzipped file, inflated by the browser itself. A host that sends it with `Content-Encoding: gzip`
// has the browser inflate it on arrival: only bytes that start with gzip's magic (1f 8b) are inflated.
async function inflate(url) {
  const raw = await bytes(url);
  if (raw[0] !== 0x1f || raw[1] !== 0x8b) return raw;
  try {
    return new Uint8Array(await new Response(new Blob([raw]).stream().pipeThrough(new DecompressionStream("gzip"))).arrayBuffer());
  } catch (e) {
    throw new SiteError("damaged", url, e);
  }
}

// one plain sentence's middle: why a file could not be used, and what to do about it
function why(e) {
  if (!(e instanceof SiteError)) return ["something in this browser went wrong", "reload the page, or try a current Chrome, Firefox or Safari"];
  if (e.kind === "offline") return ["it could not be downloaded (is the device offline?)", "reconnect and try again"];
  if (e.kind === "missing") return ["its files are missing from this site", "whoever hosts the site can rebuild it with capsviz site"];
  return ["its files on this site are damaged", "whoever hosts the site can rebuild it with capsviz site"];
}

// A graph's weights as `capsviz site` packed them: every even byte, then every odd byte
function interleave(packed) {
  const half = packed.length / 2;
  const out = new Uint8Array(packed.length);
  for (let k = 0; k < half; k++) {
    out[2 * k] = packed[k];
    out[2 * k + 1] = packed[half + k];
  }
  return out;
}

let runtime = null; // resolves once the WebAssembly runtime is inflated and handed to onnxruntime (start)
let creating = Promise.resolve(); // onnxruntime makes one session at a time: two at once fail while it starts

// The graph and its weights download and inflate while the runtime does; the session waits for both
async function openGraph(graph) {
  const [model, weights] = await Promise.all([bytes(graph.onnx), graph.weights ? inflate(graph.weights).then(interleave) : null]);
  await runtime;
  const options = { executionProviders: ["wasm"] };
  if (weights) options.externalData = [{ path: graph.name, data: weights }];
  const made = creating.then(() => ort.InferenceSession.create(model, options)).catch((e) => {
    throw new SiteError("damaged", graph.onnx, e); // onnxruntime's words ("protobuf parsing failed") go to the console
  });
  creating = made.catch(() => null);
  return made;
}

// graph: a manifest entry {onnx, weights, name}; one session each, made on first use (and tried again after a failure)
async function session(graph) {
  if (!site.sessions.has(graph.onnx)) {
    const made = openGraph(graph);
    made.catch(() => site.sessions.delete(graph.onnx));
    site.sessions.set(graph.onnx, made);
  }
  return site.sessions.get(graph.onnx);
}

function tensor(data, dims) {
  return new ort.Tensor(data instanceof BigInt64Array ? "int64" : "float32", data, dims);
}

async function imageSet(key) {
  if (!site.images.has(key)) {
    const info = site.manifest.image_sets[key];
    const [, S, C] = key.match(/-([0-9]+)-([0-9]+)$/).map(Number); // DATASET-SIZE-CHANNELS
    const made = inflate(info.file).then((pixels) => {
      if (pixels.length !== info.count * S * S * C) throw new SiteError("damaged", info.file, `${pixels.length} bytes`);
      return { ...info, pixels };
    });
    made.catch(() => site.images.delete(key));
    site.images.set(key, made);
  }
  return site.images.get(key);
}

// One image through a model: what every view draws. `rule` picks the routing graph.
async function computeFor(model, pixels, rule) {
  const S = model.in_size;
  const C = model.channels;
  const enc = await (await session(model.graphs.encoder)).run({ image: tensor(pixels, [1, C, S, S]) });
  const uHat = enc.u_hat;
  const [, J, I, D] = uHat.dims;
  const out = { model, J, I, D, u: enc.u.data, uHat: uHat.data, features: enc.features || null };
  if (rule === "dynamic") {
    const r = await (await session(site.manifest.graphs.dynamic)).run({ u_hat: uHat });
    Object.assign(out, { rule, c: r.c.data, v: r.v.data, agreement: r.agreement.data, T: r.c.dims[0] });
  } else {
    const r = await (await session(model.graphs.attention)).run({ u_hat: uHat });
    Object.assign(out, { rule, c: r.c.data, a: r.a.data, v: r.v.data, T: 1 });
  }
  return out;
}

// |v_j| after `iterations` iterations (the dynamic graph records ten; n iterations are its first n)
function lengthsAt(res, iterations) {
  const { J, D } = res;
  const t = res.rule === "dynamic" ? iterations - 1 : 0;
  const out = new Float32Array(J);
  for (let j = 0; j < J; j++) {
    let s = 0;
    for (let d = 0; d < D; d++) s += res.v[(t * J + j) * D + d] ** 2;
    out[j] = Math.sqrt(s);
  }
  return out;
}

function vectorAt(res, iterations, j) {
  const t = res.rule === "dynamic" ? iterations - 1 : 0;
  return res.v.slice((t * res.J + j) * res.D, (t * res.J + j + 1) * res.D);
}

function couplingsAt(res, t) {
  const n = res.I * res.J;
  return res.c.slice(t * n, (t + 1) * n); // (I, J)
}

async function decode(model, vectors, capsules) {
  const B = capsules.length;
  const r = await (await session(model.graphs.decoder)).run({
    vectors: tensor(vectors, [B, model.dim]),
    capsules: tensor(BigInt64Array.from(capsules, (j) => BigInt(j)), [B]),
  });
  return r.reconstruction.data; // (B, C, S, S)
}

function argmax(a) {
  let best = 0;
  for (let i = 1; i < a.length; i++) if (a[i] > a[best]) best = i;
  return best;
}

// mean entropy of the couplings over log J: 1 is uniform (each lower capsule splits its vote evenly)
function uniformShare(c, I, J) {
  let total = 0;
  for (let i = 0; i < I; i++) {
    let h = 0;
    for (let j = 0; j < J; j++) {
      const p = Math.max(c[i * J + j], 1e-12);
      h -= p * Math.log(p);
    }
    total += h;
  }
  return total / I / Math.log(J);
}

// ---------- drawing pixels ----------
const VIRIDIS = [
  [68, 1, 84],
  [59, 82, 139],
  [33, 145, 140],
  [94, 201, 98],
  [253, 231, 37],
];
function viridis(x) {
  const f = Math.min(Math.max(x, 0), 1) * (VIRIDIS.length - 1);
  const k = Math.min(Math.floor(f), VIRIDIS.length - 2);
  const w = f - k;
  return VIRIDIS[k].map((a, n) => Math.round(a + w * (VIRIDIS[k + 1][n] - a)));
}

// pixels (C, S, S) in [0, 1] onto a canvas of S x S (CSS scales it up)
function paint(canvas, pixels, S, C = 1) {
  canvas.width = S;
  canvas.height = S;
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(S, S);
  for (let p = 0; p < S * S; p++) {
    for (let ch = 0; ch < 3; ch++) img.data[4 * p + ch] = Math.round(255 * pixels[(C === 3 ? ch * S * S : 0) + p]);
    img.data[4 * p + 3] = 255;
  }
  ctx.putImageData(img, 0, 0);
}

// a (rows, cols) map coloured by viridis from lo (dark) to hi (yellow), nearest-neighbour
function heat(canvas, values, rows, cols, hi, lo = 0) {
  canvas.width = cols;
  canvas.height = rows;
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(cols, rows);
  for (let p = 0; p < rows * cols; p++) {
    const [r, g, b] = viridis((values[p] - lo) / (hi - lo || 1));
    img.data.set([r, g, b, 255], 4 * p);
  }
  ctx.putImageData(img, 0, 0);
}

function range(values) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    lo = Math.min(lo, v);
    hi = Math.max(hi, v);
  }
  return [lo, hi];
}

// the same map stretched over the input image, which shows through in white
function heatOver(canvas, values, G, hi, lo, pixels, S) {
  const small = document.createElement("canvas");
  heat(small, values, G, G, hi, lo);
  const input = document.createElement("canvas");
  paint(input, pixels, S);
  canvas.width = S;
  canvas.height = S;
  const ctx = canvas.getContext("2d");
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(small, 0, 0, S, S);
  ctx.globalAlpha = 0.35;
  ctx.globalCompositeOperation = "lighter";
  ctx.drawImage(input, 0, 0);
}

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

function table(node, rows) {
  node.replaceChildren(...rows.map(([k, v]) => el("tr", {}, el("th", { scope: "row" }, k), el("td", {}, v))));
}

function fmt(x, digits = 2) {
  return Number(x).toFixed(digits);
}

const PLOT = { displayModeBar: false, responsive: true };
// plotly.js 3 and later read an axis title only as {text}: a plain string is ignored
function layout(title, x, y, extra = {}) {
  const { xaxis, yaxis, ...rest } = extra;
  return {
    title: { text: title, font: { size: 14 } },
    margin: { l: 56, r: 12, t: 36, b: 48 },
    height: 270,
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: "rgba(0,0,0,0)",
    xaxis: { type: "category", title: { text: x }, ...xaxis }, // category: every class named under its bar
    yaxis: { title: { text: y }, ...yaxis },
    ...rest,
  };
}

// a chart with its text alternative: `summary` says the numbers it shows
function plot(node, traces, lay, summary) {
  Plotly.react(node, traces, lay, PLOT);
  node.setAttribute("role", "img");
  node.setAttribute("aria-label", summary);
}

function chart(parent) {
  return parent.appendChild(el("div", { class: "chart" }));
}

// "name value, name value, ...": the numbers of a chart or picture, for its text alternative
function pairs(names, values, digits = 2) {
  return Array.from(values, (v, k) => `${names[k]} ${fmt(v, digits)}`).join(", ");
}

// a canvas named by what it shows and its numbers (a canvas is otherwise silent to a screen reader)
function named(canvas, label) {
  canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", label);
  return canvas;
}

// the colours of heat() from lo to hi, with the two numbers at its ends
function scale(lo, hi, digits = 2) {
  const ramp = el("span", { class: "ramp", "aria-hidden": "true" });
  return el("span", { class: "scale" }, `${fmt(lo, digits)} `, ramp, ` ${fmt(hi, digits)}`);
}

// a canvas of (rows, cols) cells with each row and column named beside it
function labelled(box, canvas, rowNames, colNames, corner) {
  box.classList.add("labelled");
  const rows = el("div", { class: "rows", "aria-hidden": "true" }, ...rowNames.map((r) => el("span", {}, r)));
  const cols = el("div", { class: "cols", "aria-hidden": "true" }, ...colNames.map((c) => el("span", {}, c)));
  box.replaceChildren(el("span", { class: "corner", "aria-hidden": "true" }, corner), cols, rows, canvas);
  return box;
}

// ---------- the input ----------
// test image `index` of model m's set, (C, S, S) in [0, 1] as the app reads it
function testImage(m, set, index) {
  const n = m.channels * m.in_size * m.in_size;
  return Float32Array.from(set.pixels.subarray(index * n, (index + 1) * n), (v) => v / 255);
}

function currentPixels(set) {
  return state.drawn || testImage(site.model, set, state.image);
}

function drawing() {
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
    refresh();
  };
  canvas.addEventListener("pointerup", lift);
  canvas.addEventListener("pointercancel", lift);
}

function startDrawing() {
  const m = site.model;
  state.drawn = new Float32Array(m.in_size * m.in_size);
  paint($("sketch"), state.drawn, m.in_size);
  $("label").textContent = "Your drawing: draw one digit, white on black; the model sees it when you lift the pen.";
}

// ---------- views ----------
let current = null; // the latest computation, for the views and for tests
const timings = { slider: [], iterations: [] }; // ms from a control's event to its view drawn (the benchmark reads them)
let gridKey = null;

async function refresh() {
  const m = site.model;
  const set = await imageSet(m.images);
  const pixels = currentPixels(set);
  paint($("sketch"), pixels, m.in_size, m.channels);
  if (!state.drawn) $("label").textContent = `Test image ${state.image} of ${set.count} (true class: ${m.classes[set.labels[state.image]]}).`;
  const rule = m.routing === "dynamic" ? "dynamic" : state.rule || m.routing;
  current = await computeFor(m, pixels, rule);
  current.pixels = pixels;
  await render();
}

async function render() {
  for (const v of VIEWS) $(v).hidden = v !== state.view;
  for (const b of document.querySelectorAll("nav button")) b.setAttribute("aria-current", b.dataset.view === state.view ? "page" : "false");
  $("input").hidden = state.view === "playground";
  if (state.view === "explore") await renderExplore();
  if (state.view === "routing") renderRouting();
  if (state.view === "tour") await renderTour();
  if (state.view === "playground") await renderPlayground();
  writeAddress();
  say();
}

let problem = ""; // a model that could not be opened: said until another model opens
function say() {
  $("status").textContent = [problem, ...notes].filter(Boolean).join(" ");
}

function modelIterations() {
  return current.rule === "dynamic" ? state.iterations : 1;
}

async function renderExplore() {
  const m = site.model;
  const lengths = lengthsAt(current, modelIterations());
  const best = argmax(lengths);
  const title = `The longest: ${m.classes[best]} (${fmt(lengths[best])})`;
  plot(
    $("lengths"),
    [
      {
        type: "bar",
        x: m.classes,
        y: Array.from(lengths),
        marker: { color: m.classes.map((_, j) => (j === best ? "#0072B2" : "#9aa5b1")) },
        text: Array.from(lengths, (v) => fmt(v)),
        textposition: "outside",
        hovertemplate: "%{x}: length %{y:.3f}<extra></extra>",
      },
    ],
    layout(title, "class capsule", "length |v_j|", { yaxis: { range: [0, 1.1] } }),
    `Bar chart. ${title}. Length of each class capsule: ${pairs(m.classes, lengths)}.`,
  );
  const pick = $("capsule");
  if (state.capsule === null || state.capsule >= m.classes.length) state.capsule = best;
  pick.replaceChildren(...m.classes.map((name, j) => el("option", { value: String(j) }, `${name} (length ${fmt(lengths[j])})`)));
  pick.value = String(state.capsule);
  await redraw();
  const key = `${m.name}|${state.image}|${state.drawn ? "drawn" : ""}|${state.capsule}|${current.rule}|${state.iterations}`;
  if (key !== gridKey || state.drawn) {
    gridKey = key;
    await drawGrid();
  }
}

// the reconstruction from the chosen capsule with the sliders' changes: a slider move runs this alone
async function redraw() {
  const m = site.model;
  const vector = vectorAt(current, modelIterations(), state.capsule).map((x, d) => x + state.dims[d]);
  const rec = await decode(m, vector, [state.capsule]);
  paint($("reconstruction"), rec, m.in_size, m.channels);
  const changed = Array.from(state.dims, (v, d) => (v ? `d${d} ${v > 0 ? "+" : ""}${fmt(v)}` : null)).filter(Boolean);
  named($("reconstruction"), `The decoder's reconstruction from capsule ${m.classes[state.capsule]}${changed.length ? `, with ${changed.join(", ")}` : ", no dimension changed"}.`);
  current.reconstruction = rec;
  for (let d = 0; d < 16; d++) {
    const input = $(`dim${d}`);
    if (input) {
      input.value = String(state.dims[d]);
      $(`dim${d}-out`).textContent = (state.dims[d] >= 0 ? "+" : "") + fmt(state.dims[d]);
    }
  }
}

async function drawGrid() {
  const m = site.model;
  const D = m.dim;
  const base = vectorAt(current, modelIterations(), state.capsule);
  const vectors = new Float32Array(D * STEPS.length * D);
  for (let d = 0; d < D; d++) {
    for (let k = 0; k < STEPS.length; k++) {
      const row = vectors.subarray((d * STEPS.length + k) * D, (d * STEPS.length + k + 1) * D);
      row.set(base);
      row[d] += STEPS[k];
    }
  }
  const rec = await decode(m, vectors, new Array(D * STEPS.length).fill(state.capsule));
  const S = m.in_size;
  const C = m.channels;
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
  named(canvas, `Perturbation grid for capsule ${m.classes[state.capsule]}: ${D} rows, one per dimension (d0 at the top), each changed alone from -0.25 (left) to +0.25 (right) in steps of 0.05; the middle column is the capsule's own reconstruction.`);
}

function renderRouting() {
  const m = site.model;
  const dynamic = current.rule === "dynamic";
  $("rule-pick").hidden = m.routing === "dynamic";
  $("iterations").disabled = !dynamic;
  $("t").disabled = !dynamic;
  const T = modelIterations();
  state.t = Math.min(state.t, T);
  $("iterations").value = String(state.iterations);
  $("iterations-out").textContent = dynamic ? String(state.iterations) : "one pass";
  $("t").max = String(T);
  $("t").value = String(state.t);
  $("t-out").textContent = String(state.t);
  $("routing-title").textContent = dynamic ? "Dynamic routing, iteration by iteration" : "Self-attention routing, in one pass";
  const { I, J } = current;
  const t = dynamic ? state.t - 1 : 0;
  const c = couplingsAt(current, t);
  const share = uniformShare(c, I, J);
  $("iterations").parentElement.hidden = !dynamic;
  $("t").parentElement.hidden = !dynamic || T === 1;
  const how = dynamic ? `Iteration ${t + 1} of ${T}: each` : "One pass of self-attention: each";
  const map = m.grid
    ? "Each map: a class's coupling at each place of the image, averaged over the capsule types, from the smallest on this iteration (dark) to the largest (yellow), the input showing through in white."
    : "The map: a row per primary capsule (each sees the whole image), a column per class; coupling from 0 (dark) to the largest (yellow).";
  $("routing-note").textContent =
    `${how} primary capsule splits its vote over the ${J} class capsules; uniform is 1/${J} = ${fmt(1 / J, 3)} each. ` +
    `The couplings' evenness is ${fmt(100 * share, share > 0.99 ? 2 : 1)}% (100% = every capsule spreads its vote evenly over all ${J} classes, 0% = all of it to one). ${map}`;
  const maps = $("maps");
  maps.replaceChildren();
  const lengths = lengthsAt(current, t + 1); // the captions follow the iteration shown
  const after = dynamic ? `after iteration ${t + 1}` : "after the one pass";
  if (m.grid) {
    const G = m.grid;
    const K = m.types;
    const all = Array.from({ length: J }, (_, j) => {
      const map = new Float32Array(G * G);
      for (let p = 0; p < G * G; p++) {
        let s = 0;
        for (let k = 0; k < K; k++) s += c[(p * K + k) * J + j];
        map[p] = s / K;
      }
      return map;
    });
    const lo = Math.min(...all.map((a) => range(a)[0]));
    const hi = Math.max(...all.map((a) => range(a)[1]));
    all.forEach((map, j) => {
      const canvas = el("canvas");
      heatOver(canvas, map, G, hi, lo, current.pixels, m.in_size);
      const mean = map.reduce((a, b) => a + b, 0) / map.length;
      const [a, b] = range(map);
      named(canvas, `Couplings to ${m.classes[j]} over the image on iteration ${t + 1}: mean ${fmt(mean, 3)}, from ${fmt(a, 3)} to ${fmt(b, 3)}; |v| ${after} ${fmt(lengths[j])}.`);
      maps.append(el("figure", {}, canvas, el("figcaption", {}, `${m.classes[j]}: mean c ${fmt(mean, 3)}, |v| ${fmt(lengths[j])}`)));
    });
    maps.append(el("p", { class: "note" }, "Colour scale: ", scale(lo, hi, 3), ` (dark to yellow). |v|: each class capsule's length ${after}.`));
  } else {
    const [, top] = range(c);
    const canvas = el("canvas", { class: "matrix" });
    heat(canvas, c, I, J, top);
    const mean = Array.from({ length: J }, (_, j) => {
      let s = 0;
      for (let i = 0; i < I; i++) s += c[i * J + j];
      return s / I;
    });
    named(canvas, `Couplings of the ${I} primary capsules (rows, 1 at the top) to the ${J} classes (columns), from 0 to ${fmt(top, 3)}. Mean coupling to each class: ${pairs(m.classes, mean, 3)}.`);
    const box = labelled(el("div"), canvas, Array.from({ length: I }, (_, i) => String(i + 1)), m.classes, "");
    maps.append(
      el(
        "figure",
        { class: "wide" },
        box,
        el("figcaption", {}, `Rows: the ${I} primary capsules; columns: the classes. Colour: coupling c_ij, `, scale(0, top, 3), " (dark to yellow)."),
      ),
    );
  }
  const steps = Array.from({ length: T }, (_, k) => k + 1);
  if (T === 1) {
    const title = dynamic ? "|v_j| after 1 iteration" : "|v_j| after the one pass";
    plot(
      $("iter-lengths"),
      [{ type: "bar", x: m.classes, y: Array.from(lengths), marker: { color: "#0072B2" }, text: Array.from(lengths, (v) => fmt(v)), textposition: "outside" }],
      layout(title, "class capsule", "length |v_j|", { yaxis: { range: [0, 1.1] } }),
      `Bar chart, ${title}: ${pairs(m.classes, lengths)}.`,
    );
  } else {
    const traces = m.classes.map((name, j) => ({ type: "scatter", mode: "lines+markers", name, x: steps, y: steps.map((n) => lengthsAt(current, n)[j]) }));
    plot(
      $("iter-lengths"),
      traces,
      layout("|v_j| after each iteration", "iteration", "length |v_j|", {
        height: 340,
        legend: { orientation: "h", y: -0.35 },
        xaxis: { type: "linear", dtick: 1 },
        yaxis: { range: [0, 1] },
        shapes: [{ type: "line", x0: t + 1, x1: t + 1, y0: 0, y1: 1, line: { dash: "dot", color: "#5a6570", width: 1 } }],
      }),
      `Line chart of each class capsule's length after each of ${T} iterations (the dotted line marks iteration ${t + 1}, shown above). ` +
        `After iteration ${t + 1}: ${pairs(m.classes, lengths)}. After iteration ${T}: ${pairs(m.classes, lengthsAt(current, T))}.`,
    );
  }
  const shares = steps.map((n) => 100 * uniformShare(couplingsAt(current, n - 1), I, J));
  const digits = shares.some((v) => v > 99) ? 2 : 1; // 100, 99.99 and 99.91 are told apart only by their numbers
  plot(
    $("iter-uniform"),
    [{ type: "bar", x: steps, y: shares, marker: { color: "#0072B2" }, text: shares.map((v) => `${fmt(v, digits)}%`), textposition: "inside", insidetextanchor: "end", textfont: { color: "#fff" } }],
    layout("Evenness of the couplings, %", dynamic ? "iteration" : "the one pass", "evenness % (100 = even)", { xaxis: { dtick: 1 }, yaxis: { range: [0, 100] } }),
    `Bar chart of the couplings' evenness (their entropy as a share of an even split's): ${pairs(steps.map((n) => (dynamic ? `iteration ${n}` : "the one pass")), shares, digits)} percent.`,
  );
}

// ---------- the tour ----------
function help(terms) {
  const g = site.manifest.glossary;
  $("step-help").replaceChildren(
    ...terms.flatMap((k) => {
      const t = g[k];
      return t ? [el("dt", {}, t.symbol === t.word ? t.symbol : `${t.symbol} (${t.word})`), el("dd", {}, t.explanation)] : [];
    }),
  );
}

async function renderTour() {
  const m = site.model;
  const steps = m.tour;
  state.step = Math.min(Math.max(state.step, 1), steps.length);
  const step = steps[state.step - 1];
  $("step-of").textContent = `Step ${state.step} of ${steps.length}`;
  $("back").disabled = state.step === 1;
  $("forward").disabled = state.step === steps.length;
  $("step-title").textContent = step.title;
  help(step.terms);
  const fig = $("step-figure");
  fig.replaceChildren();
  const T = m.routing === "dynamic" ? m.iterations : 1;
  const res = current.rule === m.routing ? current : await computeFor(m, current.pixels, m.routing); // the tour follows the model's own routing
  const lengths = lengthsAt(res, T);
  const order = Array.from(lengths.keys()).sort((a, b) => lengths[b] - lengths[a]);
  const { I, J, D } = res;
  const rows = [];
  const key = /^iteration[0-9]+$/.test(step.key) ? "iteration" : step.key; // "conv1" is a step of its own
  if (key === "input") {
    const c = named(el("canvas"), `The input image, ${m.in_size} x ${m.in_size} pixels`);
    paint(c, current.pixels, m.in_size, m.channels);
    fig.append(c);
    rows.push(["size", `${m.in_size} x ${m.in_size} pixels, ${m.channels === 3 ? "colour" : "grey"}`], ["values", "0 (black) to 1 (white)"]);
  } else if ((key === "conv1" || key === "convs") && res.features) {
    const f = res.features; // (1, S', S', C) NHWC
    const [, S2, , C1] = f.dims;
    const mean = new Float32Array(C1);
    for (let p = 0; p < S2 * S2; p++) for (let k = 0; k < C1; k++) mean[k] += f.data[p * C1 + k];
    const strongest = Array.from(mean.keys()).sort((a, b) => mean[b] - mean[a]).slice(0, 16);
    for (const k of strongest) {
      const map = new Float32Array(S2 * S2);
      let top = 0;
      for (let p = 0; p < S2 * S2; p++) top = Math.max(top, (map[p] = f.data[p * C1 + k]));
      const c = named(el("canvas"), `Feature map ${k + 1}: mean response ${fmt(mean[k] / (S2 * S2), 3)}, strongest ${fmt(top, 3)}`);
      heat(c, map, S2, S2, top);
      fig.append(el("figure", {}, c, el("figcaption", {}, `map ${k + 1}`)));
    }
    const which = key === "conv1" ? "Conv1's" : "the last convolution's";
    rows.push(["feature maps", `${C1} of ${which}, each ${S2} x ${S2}`], ["shown", "the 16 with the largest mean"], ["colour", "0 (dark) to each map's own maximum (yellow)"]);
  } else if (key === "primary") {
    const len = Array.from({ length: I }, (_, i) => Math.hypot(...res.u.slice(i * (res.u.length / I), (i + 1) * (res.u.length / I))));
    if (m.grid) {
      const G = m.grid;
      const K = m.types;
      const best = new Float32Array(G * G);
      for (let p = 0; p < G * G; p++) best[p] = Math.max(...len.slice(p * K, (p + 1) * K));
      // the scale runs from the shortest to the longest shown: near-saturated lengths (0.97 to 1.00) still differ in colour
      const [lo, hi] = range(best);
      const c = named(el("canvas"), `The longest primary capsule at each of the ${G} x ${G} places: lengths from ${fmt(lo, 3)} to ${fmt(hi, 3)}`);
      heat(c, best, G, G, hi, lo);
      fig.append(el("figure", {}, c, el("figcaption", {}, "The longest primary capsule at each place: ", scale(lo, hi, 3), " (dark to yellow)")));
      rows.push(["primary capsules", `${I} = ${G} x ${G} places x ${K} types`], ["longest at each place", `${fmt(lo, 3)} to ${fmt(hi, 3)}`]);
    } else {
      const names = len.map((_, i) => String(i + 1));
      plot(
        chart(fig),
        [{ type: "bar", x: names, y: len, marker: { color: "#0072B2" } }],
        layout("|u_i| of each primary capsule", "primary capsule i", "length |u_i|", { yaxis: { range: [0, 1] } }),
        `Bar chart of the length of each of the ${I} primary capsules: ${pairs(names, len)}.`,
      );
      rows.push(["primary capsules", `${I}, each seeing the whole image`]);
    }
    rows.push(["longest |u_i|", fmt(Math.max(...len))], ["mean |u_i|", fmt(len.reduce((a, b) => a + b, 0) / I)]);
  } else if (key === "predictions") {
    const mean = Array.from({ length: J }, (_, j) => {
      let s = 0;
      for (let i = 0; i < I; i++) s += Math.hypot(...res.uHat.slice((j * I + i) * D, (j * I + i + 1) * D));
      return s / I;
    });
    plot(
      chart(fig),
      [{ type: "bar", x: m.classes, y: mean, marker: { color: "#9aa5b1" } }],
      layout("Mean |u_hat_j|i| for each class capsule", "class capsule j", "mean length |u_hat_j|i|"),
      `Bar chart of the mean length of the predictions for each class capsule: ${pairs(m.classes, mean)}.`,
    );
    rows.push(["predictions", `${I} x ${J}, each of ${D} numbers`]);
  } else if (key === "iteration" || key === "routing") {
    const t = key === "iteration" ? Number(step.key.slice(9)) - 1 : 0;
    const c = couplingsAt(res, t);
    const atT = lengthsAt(res, t + 1);
    const title = `|v_j| after this ${key === "iteration" ? "iteration" : "pass"}`;
    plot(
      chart(fig),
      [{ type: "bar", x: m.classes, y: Array.from(atT), marker: { color: "#0072B2" } }],
      layout(title, "class capsule", "length |v_j|", { yaxis: { range: [0, 1] } }),
      `Bar chart, ${title}: ${pairs(m.classes, atT)}.`,
    );
    for (const j of order.slice(0, 3)) {
      let s = 0;
      for (let i = 0; i < I; i++) s += c[i * J + j];
      rows.push([`mean c to ${m.classes[j]}`, fmt(s / I, 3)]);
    }
    rows.push(["uniform", `1/${J} = ${fmt(1 / J, 3)}`], ["evenness, % (100 = spread evenly)", fmt(100 * uniformShare(c, I, J), 1)]);
  } else if (key === "lengths") {
    plot(
      chart(fig),
      [{ type: "bar", x: m.classes, y: Array.from(lengths), marker: { color: "#0072B2" } }],
      layout("|v_j|: the answer is the longest", "class capsule", "length |v_j|", { yaxis: { range: [0, 1] } }),
      `Bar chart of the class capsules' lengths: ${pairs(m.classes, lengths)}.`,
    );
    rows.push(["answer", `${m.classes[order[0]]} (${fmt(lengths[order[0]])})`], ["runner-up", `${m.classes[order[1]]} (${fmt(lengths[order[1]])})`]);
  } else if (key === "reconstruction") {
    const rec = await decode(m, vectorAt(res, T, order[0]), [order[0]]);
    const a = named(el("canvas"), "The input");
    const b = named(el("canvas"), `The reconstruction from capsule ${m.classes[order[0]]}`);
    paint(a, current.pixels, m.in_size, m.channels);
    paint(b, rec, m.in_size, m.channels);
    fig.append(el("figure", {}, a, el("figcaption", {}, "input")), el("figure", {}, b, el("figcaption", {}, `decoded from ${m.classes[order[0]]}`)));
    let diff = 0;
    for (let p = 0; p < rec.length; p++) diff += Math.abs(rec[p] - current.pixels[p]);
    rows.push(["mean pixel difference", fmt(diff / rec.length, 3)]);
  } else if (key === "lab") {
    fig.append(el("p", {}, "The routing lab, which runs this model with uniform and random couplings and compares them, is in the full capsviz app (Routing lab page)."));
  } else {
    fig.append(el("p", {}, "This step's figure is shown in the full capsviz app's guided tour."));
  }
  table($("step-numbers"), rows);
}

// ---------- the playground ----------
function toyPoints() {
  const base = site.manifest.playground.presets[state.toy.preset]; // (I, 3, 2)
  return state.toy.pts || base.flat(2);
}

async function renderPlayground() {
  const pg = site.manifest.playground;
  const I = pg.lower;
  const J = state.toy.J;
  const pts = toyPoints(); // (I, 3, 2) flat
  const uHat = new Float32Array(J * I * 2); // (1, J, I, 2)
  for (let j = 0; j < J; j++) for (let i = 0; i < I; i++) for (let d = 0; d < 2; d++) uHat[(j * I + i) * 2 + d] = pts[(i * 3 + j) * 2 + d];
  const dynamic = state.toy.rule === "dynamic";
  const graph = site.manifest.graphs[dynamic ? "dynamic" : "attention"];
  const r = await (await session(graph)).run({ u_hat: tensor(uHat, [1, J, I, 2]) });
  const T = dynamic ? state.toy.T : 1;
  const t = T - 1;
  const c = r.c.data.slice(dynamic ? t * I * J : 0, dynamic ? (t + 1) * I * J : I * J);
  const v = r.v.data.slice(dynamic ? t * J * 2 : 0, dynamic ? (t + 1) * J * 2 : J * 2);
  $("toy-T").disabled = !dynamic;
  $("toy-T-out").textContent = dynamic ? String(T) : "one pass";
  const svg = $("toy");
  const ns = "http://www.w3.org/2000/svg";
  const line = (x, y, colour, width, opacity, dash) => {
    const l = document.createElementNS(ns, "line");
    for (const [k, val] of Object.entries({ x1: 0, y1: 0, x2: x, y2: -y, "stroke-width": width, opacity, "stroke-dasharray": dash || "" })) l.setAttribute(k, val);
    l.style.stroke = colour; // a style, not an attribute: the colours are the page's CSS variables
    return l;
  };
  const text = (x, y, s, colour) => {
    const n = document.createElementNS(ns, "text");
    n.setAttribute("x", x);
    n.setAttribute("y", -y);
    n.style.fill = colour;
    n.setAttribute("font-size", "0.22");
    n.textContent = s;
    return n;
  };
  svg.replaceChildren();
  for (let j = 0; j < J; j++) {
    for (let i = 0; i < I; i++) {
      const [x, y] = [pts[(i * 3 + j) * 2], pts[(i * 3 + j) * 2 + 1]];
      svg.append(line(x, y, UPPER_COLOURS[j], 0.03 + 0.09 * c[i * J + j], 0.25 + 0.75 * c[i * J + j], j === 1 ? "0.12 0.06" : j === 2 ? "0.03 0.05" : ""));
      svg.append(text(x, y, `${i + 1}`, UPPER_COLOURS[j]));
    }
    const [vx, vy] = [v[j * 2] * 3, v[j * 2 + 1] * 3];
    svg.append(line(vx, vy, "#111", 0.1, 1));
    svg.append(text(vx, vy, `v${j + 1}`, "#111"));
  }
  const head = el("tr", {}, el("th", {}, "lower"), ...Array.from({ length: J }, (_, j) => el("th", { style: `color:${UPPER_COLOURS[j]}` }, `c to upper ${j + 1}`)));
  const body = Array.from({ length: I }, (_, i) => el("tr", {}, el("th", { scope: "row" }, `lower ${i + 1}`), ...Array.from({ length: J }, (_, j) => el("td", {}, fmt(c[i * J + j], 3)))));
  const lengths = Array.from({ length: J }, (_, j) => fmt(Math.hypot(v[j * 2], v[j * 2 + 1])));
  const foot = el("tr", {}, el("th", {}, "|v_j| (drawn x3)"), ...lengths.map((x) => el("td", {}, x)));
  $("toy-table").replaceChildren(head, ...body, foot);
  svg.setAttribute(
    "aria-label",
    `Predictions of the ${I} lower capsules (lines numbered 1 to ${I}, one colour per upper capsule) and the ${J} upper capsules v (black, drawn 3 times as long): ` +
      `lengths ${lengths.map((x, j) => `v${j + 1} ${x}`).join(", ")}; the couplings are in the table beside.`,
  );
  const inputs = $("cap-inputs");
  inputs.replaceChildren();
  const i = state.toy.cap - 1;
  for (let j = 0; j < J; j++) {
    for (const [d, axis] of [
      [0, "x"],
      [1, "y"],
    ]) {
      const box = el("input", { type: "number", min: String(-pg.limit), max: String(pg.limit), step: "0.1", value: String(pts[(i * 3 + j) * 2 + d]), "aria-label": `lower ${i + 1}'s prediction for upper ${j + 1}, ${axis}` });
      box.addEventListener("change", () => {
        const p = toyPoints().slice();
        const val = Math.min(pg.limit, Math.max(-pg.limit, Number(box.value) || 0));
        p[(i * 3 + j) * 2 + d] = Math.round(val * 10) / 10;
        state.toy.pts = p;
        render();
      });
      inputs.append(el("label", {}, `upper ${j + 1} ${axis} `, box));
    }
  }
}

// ---------- wiring ----------
function controls() {
  for (const b of document.querySelectorAll("nav button")) {
    b.addEventListener("click", () => {
      state.view = b.dataset.view;
      render();
    });
  }
  $("model").addEventListener("change", async () => {
    const name = $("model").value;
    const before = site.model;
    $("status").textContent = `Loading ${label(name)} ...`;
    try {
      await prepare(site.manifest.models.find((x) => x.name === name));
    } catch (e) {
      console.error(e); // the runtime's own words, for whoever debugs the host
      $("model").value = before.name; // the view keeps the model it computed with
      const [cause, todo] = why(e);
      problem = `Could not open the model ${label(name)}: ${cause}, so this still shows ${label(before.name)}; ${todo}.`;
      say();
      return;
    }
    problem = "";
    await useModel(name);
    state.capsule = null;
    await refresh();
    keepOffline();
  });
  const setImage = (i) => {
    const set = site.images.get(site.model.images);
    set.then((s) => {
      state.image = Math.min(Math.max(i, 0), s.count - 1);
      state.drawn = null;
      state.capsule = null;
      state.dims.fill(0);
      $("image").value = String(state.image);
      refresh();
    });
  };
  $("prev").addEventListener("click", () => setImage(state.image - 1));
  $("next").addEventListener("click", () => setImage(state.image + 1));
  $("image").addEventListener("change", () => setImage(Math.round(Number($("image").value) || 0)));
  $("draw").addEventListener("click", () => startDrawing());
  $("clear").addEventListener("click", () => {
    startDrawing();
    refresh();
  });
  $("capsule").addEventListener("change", () => {
    state.capsule = Number($("capsule").value);
    state.dims.fill(0);
    render();
  });
  const dims = $("dims");
  for (let d = 0; d < 16; d++) {
    const input = el("input", { type: "range", id: `dim${d}`, min: "-0.25", max: "0.25", step: "0.05", value: "0", "aria-label": `dimension ${d}` });
    input.addEventListener("input", () => {
      state.dims[d] = Number(input.value);
      const t0 = performance.now();
      redraw().then(() => {
        writeAddress();
        timings.slider.push(performance.now() - t0);
      });
    });
    dims.append(el("label", {}, `d${d} `, input, el("output", { id: `dim${d}-out` }, "+0.00")));
  }
  $("reset").addEventListener("click", () => {
    state.dims.fill(0);
    redraw().then(writeAddress);
  });
  $("iterations").addEventListener("input", () => {
    state.iterations = Number($("iterations").value);
    state.t = state.iterations;
    const t0 = performance.now();
    render().then(() => timings.iterations.push(performance.now() - t0));
  });
  $("t").addEventListener("input", () => {
    state.t = Number($("t").value);
    render();
  });
  $("rule").addEventListener("change", () => {
    state.rule = $("rule").value;
    refresh();
  });
  $("back").addEventListener("click", () => {
    state.step -= 1;
    render();
  });
  $("forward").addEventListener("click", () => {
    state.step += 1;
    render();
  });
  const pg = site.manifest.playground;
  $("preset").replaceChildren(...Object.keys(pg.presets).map((p) => el("option", { value: p }, p)));
  $("preset").value = state.toy.preset;
  $("preset").addEventListener("change", () => {
    state.toy.preset = $("preset").value;
    state.toy.pts = null;
    render();
  });
  $("uppers").value = String(state.toy.J);
  $("uppers").addEventListener("change", () => {
    state.toy.J = Number($("uppers").value);
    render();
  });
  $("toy-rule").value = state.toy.rule;
  $("toy-rule").addEventListener("change", () => {
    state.toy.rule = $("toy-rule").value;
    render();
  });
  $("toy-T").value = String(state.toy.T);
  $("toy-T").addEventListener("input", () => {
    state.toy.T = Number($("toy-T").value);
    render();
  });
  $("cap").replaceChildren(...Array.from({ length: pg.lower }, (_, i) => el("option", { value: String(i + 1) }, `lower ${i + 1}`)));
  $("cap").value = String(state.toy.cap);
  $("cap").addEventListener("change", () => {
    state.toy.cap = Number($("cap").value);
    render();
  });
  drawing();
}

function label(name) {
  return name.replace(".safetensors", "");
}

// every graph and the images of model m, opened at once (not one after another); a SiteError names what failed
async function prepare(m) {
  const graphs = [...Object.values(m.graphs), site.manifest.graphs.dynamic];
  const [set] = await Promise.all([imageSet(m.images), ...graphs.map(session)]);
  return set;
}

async function useModel(name) {
  const m = site.manifest.models.find((x) => x.name === name);
  await prepare(m);
  site.model = m;
  state.iterations = m.routing === "dynamic" ? m.iterations : 3;
  state.t = state.iterations;
  state.drawn = null;
  $("model").value = m.name;
  const set = await imageSet(m.images);
  state.image = Math.min(state.image, set.count - 1);
  $("image").max = String(set.count - 1);
  $("image").value = String(state.image);
}

async function readManifest() {
  const raw = await bytes("site.json");
  try {
    const manifest = JSON.parse(new TextDecoder().decode(raw));
    if (!Array.isArray(manifest.models) || !manifest.models.length) throw new Error("no models");
    return manifest;
  } catch (e) {
    throw new SiteError("damaged", "site.json", e); // an HTML error page in its place: "Unexpected token '<'"
  }
}

async function start() {
  runtime = inflate("vendor/ort-wasm-simd-threaded.wasm.gz").then((wasm) => {
    ort.env.wasm.wasmBinary = wasm;
  });
  runtime.catch(() => null); // said once, by the first session that waits for it
  const manifest = await readManifest();
  site.manifest = manifest;
  if (state.embed) document.body.classList.add("embed");
  $("model").replaceChildren(...manifest.models.map((m) => el("option", { value: m.name }, label(m.name))));
  let name = state.model;
  if (name && !manifest.models.some((m) => m.name === name)) {
    odd("model", name, `the model ${label(manifest.models[0].name)}`);
    name = null;
  }
  name = name || manifest.models[0].name;
  try {
    await useModel(name);
  } catch (e) {
    throw Object.assign(e, { model: name });
  }
  const set = await imageSet(site.model.images);
  state.image = intParam("image", 0, set.count - 1, 0);
  $("image").value = String(state.image);
  state.capsule = intParam("capsule", 0, site.model.classes.length - 1, null, "the longest capsule");
  readDims(params.get("dims"));
  if (site.model.routing === "dynamic" || state.rule === "dynamic") {
    state.iterations = intParam("iterations", 1, manifest.iterations_max, state.iterations);
    state.t = intParam("t", 1, state.iterations, state.iterations);
  } else {
    for (const k of ["iterations", "t"]) {
      if (params.has(k)) note(`The link asks for ${k}=${quoted(params.get(k))}, but ${label(site.model.name)} routes in one pass of self-attention (add routing=dynamic to route by agreement); it shows the one pass.`);
    }
  }
  state.step = intParam("step", 1, site.model.tour.length, 1);
  const presets = Object.keys(manifest.playground.presets);
  if (!presets.includes(state.toy.preset)) {
    if (state.toy.preset !== null) odd("preset", state.toy.preset, `the preset ${presets[0]}`);
    state.toy.preset = presets[0];
  }
  state.toy.T = intParam("T", 1, manifest.iterations_max, 3);
  state.toy.cap = intParam("cap", 1, manifest.playground.lower, 1);
  readPoints(params.get("pts"), manifest.playground);
  controls();
  await refresh();
  watchUpdates();
  keepOffline();
}

// dims=a,b,...: the explorer's 16 slider values, each in [-0.25, 0.25]
function readDims(raw) {
  if (raw === null) return;
  const parts = raw.split(",");
  const wrong = [];
  parts.slice(0, 16).forEach((x, d) => {
    const v = Number(x);
    const ok = x.trim() !== "" && Number.isFinite(v);
    const shown = ok ? Math.min(0.25, Math.max(-0.25, v)) : 0; // compared before the float32 store rounds it
    state.dims[d] = shown;
    if (!ok || v !== shown) wrong.push(`d${d}=${quoted(x)} as ${fmt(shown)}`);
  });
  if (parts.length > 16) wrong.push(`${parts.length - 16} values past d15 left out`);
  if (wrong.length) note(`The link's dims asks for values outside -0.25 to 0.25 or not numbers; it shows ${wrong.join(", ")}.`);
}

// pts=x_y_...: the playground's own predictions, 2 numbers for each lower and upper capsule, each in [-limit, limit]
function readPoints(raw, pg) {
  if (raw === null) return;
  const want = pg.lower * 3 * 2;
  const pts = raw.split("_").map((x) => (x.trim() === "" ? NaN : Number(x)));
  if (pts.length !== want || !pts.every(Number.isFinite)) {
    note(`The link's pts=${quoted(raw)} is not ${want} numbers; it shows the preset's predictions instead.`);
    return;
  }
  state.toy.pts = pts.map((x) => Math.min(pg.limit, Math.max(-pg.limit, x)));
  if (state.toy.pts.some((x, k) => x !== pts[k])) note(`The link's pts has numbers outside -${pg.limit} to ${pg.limit}; it shows them at the nearest end.`);
}

// ---------- offline: the service worker (sw.js) keeps what this page has used ----------
// A new build's worker takes over from the old one (and deletes the old copy): this page still runs the old build
let updated = false;
function watchUpdates() {
  if (!("serviceWorker" in navigator) || !navigator.serviceWorker.controller) return; // the first visit's worker is no update
  navigator.serviceWorker.addEventListener("controllerchange", () => {
    updated = true;
    $("offline").textContent = "A new version of this site has been stored for offline use; reload the page to use it.";
  });
}

async function keepOffline() {
  const where = $("offline");
  if (!("serviceWorker" in navigator) || !window.isSecureContext) {
    where.textContent = "Not kept for offline use: this browser keeps a site only when it is served over https or from localhost.";
    return;
  }
  try {
    await navigator.serviceWorker.register("sw.js");
    const worker = (await navigator.serviceWorker.ready).active;
    const { version, cache: name } = await new Promise((resolve, reject) => {
      const channel = new MessageChannel();
      channel.port1.onmessage = (ev) => resolve(ev.data);
      worker.postMessage("version", [channel.port2]);
      setTimeout(() => reject(new Error("the service worker did not answer")), 10000);
    });
    const cache = await caches.open(name);
    for (const url of used) if (!(await cache.match(url))) await cache.add(url); // fetched before the worker took over
    const kept = [];
    for (const m of site.manifest.models) {
      const files = Object.values(m.graphs).flatMap((g) => [g.onnx, g.weights].filter(Boolean));
      if ((await Promise.all(files.map((f) => cache.match(f)))).every(Boolean)) kept.push(label(m.name));
    }
    if (!updated) where.textContent = `Available offline (site version ${version}): this page and the models you opened, ${kept.join(", ")}.`;
  } catch (e) {
    console.error(e);
    where.textContent = "Not kept for offline use: this browser refused to store the site.";
  }
}

// What the tests and the benchmark call: the same computation the views draw
window.capsviz = {
  ready: start().catch((e) => {
    console.error(e); // the runtime's own words stay here; the page says what happened and what to do
    const [cause, todo] = why(e);
    const what = e.model ? `the model ${label(e.model)}` : e.url === "site.json" ? "its list of models (site.json)" : "its runtime";
    $("status").textContent = `The site could not open ${what}: ${cause}; ${todo}.`;
    throw e;
  }),
  async compute(name, index, iterations) {
    const m = site.manifest.models.find((x) => x.name === name);
    const set = await imageSet(m.images);
    const res = await computeFor(m, testImage(m, set, index), m.routing);
    const T = m.routing === "dynamic" ? iterations : 1;
    const lengths = lengthsAt(res, T);
    const best = argmax(lengths);
    const rec = await decode(m, vectorAt(res, T, best), [best]);
    return { lengths: Array.from(lengths), couplings: Array.from(res.c.slice(0, T * res.I * res.J)), reconstruction: Array.from(rec) };
  },
  state,
  timings,
  current: () => current,
};
