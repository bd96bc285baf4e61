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
const UPPER_COLOURS = ["#0072B2", "#E69F00", "#CC79A7"]; // Okabe-Ito: told apart without red/green

// ---------- the address: the same parameter names as the app's ----------
function intParam(name, lo, hi, fallback) {
  const raw = params.get(name);
  if (raw === null) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < lo || n > hi) {
    note(`The link's ${name}=${raw.slice(0, 12)} is not a whole number from ${lo} to ${hi}; showing ${fallback} instead.`);
    return fallback;
  }
  return n;
}

const notes = [];
function note(text) {
  notes.push(text);
}

const state = {
  view: VIEWS.includes(params.get("view")) ? params.get("view") : "explore",
  embed: params.get("embed") === "1",
  model: params.get("model"),
  image: 0,
  drawn: null, // Float32Array of a drawing, or null for a test image
  capsule: null,
  dims: new Float32Array(16),
  iterations: null,
  t: null,
  step: 1,
  rule: params.get("routing") === "dynamic" ? "dynamic" : null, // Efficient-CapsNet's capsules routed by agreement instead
  toy: { preset: params.get("preset"), J: params.get("J") === "2" ? 2 : 3, T: 3, cap: 1, rule: params.get("rule") === "self-attention" ? "self-attention" : "dynamic", pts: null },
};

function writeAddress() {
  const q = new URLSearchParams();
  q.set("view", state.view);
  q.set("model", site.model.name);
  if (state.drawn === null) q.set("image", String(state.image));
  if (state.capsule !== null) q.set("capsule", String(state.capsule));
  if (state.dims.some((v) => v !== 0)) q.set("dims", Array.from(state.dims, (v) => +v.toFixed(2)).join(","));
  q.set("iterations", String(state.iterations));
  q.set("t", String(state.t));
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

// A gzipped file, inflated by the browser itself
async function inflate(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return new Uint8Array(await new Response(r.body.pipeThrough(new DecompressionStream("gzip"))).arrayBuffer());
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

async function bytes(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: HTTP ${r.status}`);
  return new Uint8Array(await r.arrayBuffer());
}

// The graph and its weights download and inflate while the runtime does; the session waits for both
async function openGraph(graph) {
  const [model, weights] = await Promise.all([bytes(graph.onnx), graph.weights ? inflate(graph.weights).then(interleave) : null]);
  await runtime;
  const options = { executionProviders: ["wasm"] };
  if (weights) options.externalData = [{ path: graph.name, data: weights }];
  const made = creating.then(() => ort.InferenceSession.create(model, options));
  creating = made.catch(() => null);
  return made;
}

// graph: a manifest entry {onnx, weights, name}; one session each, made on first use
async function session(graph) {
  if (!site.sessions.has(graph.onnx)) site.sessions.set(graph.onnx, openGraph(graph));
  return site.sessions.get(graph.onnx);
}

function tensor(data, dims) {
  return new ort.Tensor(data instanceof BigInt64Array ? "int64" : "float32", data, dims);
}

async function imageSet(key) {
  if (!site.images.has(key)) {
    const info = site.manifest.image_sets[key];
    site.images.set(
      key,
      inflate(info.file).then((pixels) => ({ ...info, pixels })),
    );
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
function layout(title, extra = {}) {
  return {
    title: { text: title, font: { size: 14 } },
    margin: { l: 48, r: 12, t: 36, b: 40 },
    height: 260,
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: "rgba(0,0,0,0)",
    xaxis: { type: "category" }, // every class named under its bar
    ...extra,
  };
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
  $("status").textContent = notes.length ? notes.join(" ") : "";
}

function modelIterations() {
  return current.rule === "dynamic" ? state.iterations : 1;
}

async function renderExplore() {
  const m = site.model;
  const lengths = lengthsAt(current, modelIterations());
  const best = argmax(lengths);
  Plotly.react(
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
    layout(`The longest: ${m.classes[best]} (${fmt(lengths[best])})`, { xaxis: { type: "category" }, yaxis: { range: [0, 1.1], title: "length |v|" } }),
    PLOT,
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
    `The couplings' evenness is ${fmt(100 * share, 1)}% (100% = every capsule spreads its vote evenly over all ${J} classes, 0% = all of it to one). ${map}`;
  const maps = $("maps");
  maps.replaceChildren();
  const lengths = lengthsAt(current, T);
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
    const lo = Math.min(...all.map((a) => Math.min(...a)));
    const hi = Math.max(...all.map((a) => Math.max(...a)));
    all.forEach((map, j) => {
      const canvas = el("canvas", { "aria-label": `Couplings to ${m.classes[j]} over the image` });
      heatOver(canvas, map, G, hi, lo, current.pixels, m.in_size);
      const mean = map.reduce((a, b) => a + b, 0) / map.length;
      maps.append(el("figure", {}, canvas, el("figcaption", {}, `${m.classes[j]}: mean c ${fmt(mean, 3)}, |v| ${fmt(lengths[j])}`)));
    });
    maps.append(el("p", { class: "note" }, `Colour scale: ${fmt(lo, 3)} (dark) to ${fmt(hi, 3)} (yellow).`));
  } else {
    let top = 0;
    for (const x of c) top = Math.max(top, x);
    const canvas = el("canvas", { class: "matrix", "aria-label": "Couplings: a row per primary capsule, a column per class" });
    heat(canvas, c, I, J, top);
    maps.append(el("figure", { class: "wide" }, canvas, el("figcaption", {}, `Rows: the ${I} primary capsules; columns: ${m.classes.join(" ")}`)));
  }
  const steps = Array.from({ length: T }, (_, k) => k + 1);
  if (T === 1) {
    Plotly.react($("iter-lengths"), [{ type: "bar", x: m.classes, y: Array.from(lengths), marker: { color: "#0072B2" } }], layout(dynamic ? "|v_j| after 1 iteration" : "|v_j| after the one pass", { yaxis: { range: [0, 1] } }), PLOT);
  } else {
    Plotly.react(
      $("iter-lengths"),
      m.classes.map((name, j) => ({
        type: "scatter",
        mode: "lines+markers",
        name,
        x: steps,
        y: steps.map((n) => lengthsAt(current, n)[j]),
      })),
      layout("|v_j| after each iteration", { height: 320, legend: { orientation: "h", y: -0.3 }, xaxis: { title: "iteration", dtick: 1 }, yaxis: { title: "length", range: [0, 1] } }),
      PLOT,
    );
  }
  Plotly.react(
    $("iter-uniform"),
    [{ type: "bar", x: steps, y: steps.map((n) => 100 * uniformShare(couplingsAt(current, n - 1), I, J)), marker: { color: "#0072B2" } }],
    layout("Entropy of the couplings, % of uniform", { xaxis: { title: "iteration", dtick: 1 }, yaxis: { range: [0, 100] } }),
    PLOT,
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
  const key = step.key.replace(/[0-9]+$/, "");
  if (key === "input") {
    const c = el("canvas", { "aria-label": "The input image" });
    paint(c, current.pixels, m.in_size, m.channels);
    fig.append(c);
    rows.push(["size", `${m.in_size} x ${m.in_size} pixels, ${m.channels === 3 ? "colour" : "grey"}`], ["values", "0 (black) to 1 (white)"]);
  } else if (key === "conv1" && res.features) {
    const f = res.features; // (1, S', S', C) NHWC
    const [, S2, , C1] = f.dims;
    const mean = new Float32Array(C1);
    for (let p = 0; p < S2 * S2; p++) for (let k = 0; k < C1; k++) mean[k] += f.data[p * C1 + k];
    const strongest = Array.from(mean.keys()).sort((a, b) => mean[b] - mean[a]).slice(0, 16);
    for (const k of strongest) {
      const map = new Float32Array(S2 * S2);
      let top = 0;
      for (let p = 0; p < S2 * S2; p++) top = Math.max(top, (map[p] = f.data[p * C1 + k]));
      const c = el("canvas", { "aria-label": `Feature map ${k + 1}` });
      heat(c, map, S2, S2, top);
      fig.append(el("figure", {}, c, el("figcaption", {}, `map ${k + 1}`)));
    }
    rows.push(["feature maps", `${C1}, each ${S2} x ${S2}`], ["shown", "the 16 with the largest mean"]);
  } else if (key === "primary") {
    const len = Array.from({ length: I }, (_, i) => Math.hypot(...res.u.slice(i * (res.u.length / I), (i + 1) * (res.u.length / I))));
    if (m.grid) {
      const G = m.grid;
      const K = m.types;
      const best = new Float32Array(G * G);
      for (let p = 0; p < G * G; p++) best[p] = Math.max(...len.slice(p * K, (p + 1) * K));
      const c = el("canvas", { "aria-label": "The longest primary capsule at each place" });
      heat(c, best, G, G, 1);
      fig.append(el("figure", {}, c, el("figcaption", {}, "The longest primary capsule at each place (0 dark, 1 yellow)")));
      rows.push(["primary capsules", `${I} = ${G} x ${G} places x ${K} types`]);
    } else {
      Plotly.newPlot(fig.appendChild(el("div", { class: "chart" })), [{ type: "bar", y: len, marker: { color: "#0072B2" } }], layout("|u_i| of each primary capsule", { yaxis: { range: [0, 1] } }), PLOT);
      rows.push(["primary capsules", String(I)]);
    }
    rows.push(["longest |u_i|", fmt(Math.max(...len))], ["mean |u_i|", fmt(len.reduce((a, b) => a + b, 0) / I)]);
  } else if (key === "predictions") {
    const mean = Array.from({ length: J }, (_, j) => {
      let s = 0;
      for (let i = 0; i < I; i++) s += Math.hypot(...res.uHat.slice((j * I + i) * D, (j * I + i + 1) * D));
      return s / I;
    });
    Plotly.newPlot(fig.appendChild(el("div", { class: "chart" })), [{ type: "bar", x: m.classes, y: mean, marker: { color: "#9aa5b1" } }], layout("Mean |u_hat_j|i| for each class capsule"), PLOT);
    rows.push(["predictions", `${I} x ${J}, each of ${D} numbers`]);
  } else if (key === "iteration" || key === "routing") {
    const t = key === "iteration" ? Number(step.key.slice(9)) - 1 : 0;
    const c = couplingsAt(res, t);
    const atT = lengthsAt(res, t + 1);
    Plotly.newPlot(fig.appendChild(el("div", { class: "chart" })), [{ type: "bar", x: m.classes, y: Array.from(atT), marker: { color: "#0072B2" } }], layout(`|v_j| after this ${key === "iteration" ? "iteration" : "pass"}`, { yaxis: { range: [0, 1] } }), PLOT);
    for (const j of order.slice(0, 3)) {
      let s = 0;
      for (let i = 0; i < I; i++) s += c[i * J + j];
      rows.push([`mean c to ${m.classes[j]}`, fmt(s / I, 3)]);
    }
    rows.push(["uniform", `1/${J} = ${fmt(1 / J, 3)}`], ["evenness, % (100 = spread evenly)", fmt(100 * uniformShare(c, I, J), 1)]);
  } else if (key === "lengths") {
    Plotly.newPlot(fig.appendChild(el("div", { class: "chart" })), [{ type: "bar", x: m.classes, y: Array.from(lengths), marker: { color: "#0072B2" } }], layout("|v_j|: the answer is the longest", { yaxis: { range: [0, 1] } }), PLOT);
    rows.push(["answer", `${m.classes[order[0]]} (${fmt(lengths[order[0]])})`], ["runner-up", `${m.classes[order[1]]} (${fmt(lengths[order[1]])})`]);
  } else if (key === "reconstruction") {
    const rec = await decode(m, vectorAt(res, T, order[0]), [order[0]]);
    const a = el("canvas", { "aria-label": "The input" });
    const b = el("canvas", { "aria-label": "The reconstruction" });
    paint(a, current.pixels, m.in_size, m.channels);
    paint(b, rec, m.in_size, m.channels);
    fig.append(el("figure", {}, a, el("figcaption", {}, "input")), el("figure", {}, b, el("figcaption", {}, `decoded from ${m.classes[order[0]]}`)));
    let diff = 0;
    for (let p = 0; p < rec.length; p++) diff += Math.abs(rec[p] - current.pixels[p]);
    rows.push(["mean pixel difference", fmt(diff / rec.length, 3)]);
  } else {
    fig.append(el("p", {}, "The routing lab, which runs this model with uniform and random couplings and compares them, is in the full capsviz app (Routing lab page)."));
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
    for (const [k, val] of Object.entries({ x1: 0, y1: 0, x2: x, y2: -y, stroke: colour, "stroke-width": width, opacity, "stroke-dasharray": dash || "" })) l.setAttribute(k, val);
    return l;
  };
  const text = (x, y, s, colour) => {
    const n = document.createElementNS(ns, "text");
    n.setAttribute("x", x);
    n.setAttribute("y", -y);
    n.setAttribute("fill", colour);
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
    await useModel($("model").value);
    state.capsule = null;
    refresh();
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

async function useModel(name) {
  const m = site.manifest.models.find((x) => x.name === name);
  site.model = m;
  for (const graph of [...Object.values(m.graphs), site.manifest.graphs.dynamic]) session(graph); // all at once, not one after another
  state.iterations = m.routing === "dynamic" ? m.iterations : 3;
  state.t = state.iterations;
  state.drawn = null;
  $("model").value = m.name;
  const set = await imageSet(m.images);
  state.image = Math.min(state.image, set.count - 1);
  $("image").max = String(set.count - 1);
  $("image").value = String(state.image);
}

async function start() {
  runtime = inflate("vendor/ort-wasm-simd-threaded.wasm.gz").then((wasm) => {
    ort.env.wasm.wasmBinary = wasm;
  });
  const manifest = await (await fetch("site.json")).json();
  site.manifest = manifest;
  if (state.embed) document.body.classList.add("embed");
  $("model").replaceChildren(...manifest.models.map((m) => el("option", { value: m.name }, m.name.replace(".safetensors", ""))));
  let name = state.model;
  if (name && !manifest.models.some((m) => m.name === name)) {
    note(`This site has no model ${name.slice(0, 60)}; showing ${manifest.models[0].name} instead.`);
    name = null;
  }
  await useModel(name || manifest.models[0].name);
  const set = await imageSet(site.model.images);
  state.image = intParam("image", 0, set.count - 1, 0);
  $("image").value = String(state.image);
  state.capsule = params.has("capsule") ? intParam("capsule", 0, site.model.classes.length - 1, null) : null;
  (params.get("dims") || "").split(",").slice(0, 16).forEach((x, d) => {
    const v = Number(x);
    if (x !== "" && Number.isFinite(v)) state.dims[d] = Math.min(0.25, Math.max(-0.25, v));
  });
  if (site.model.routing === "dynamic" || state.rule === "dynamic") {
    state.iterations = intParam("iterations", 1, manifest.iterations_max, state.iterations);
    state.t = intParam("t", 1, state.iterations, state.iterations);
  }
  state.step = intParam("step", 1, site.model.tour.length, 1);
  const presets = Object.keys(manifest.playground.presets);
  if (!presets.includes(state.toy.preset)) state.toy.preset = presets[0];
  state.toy.T = intParam("T", 1, manifest.iterations_max, 3);
  state.toy.cap = intParam("cap", 1, manifest.playground.lower, 1);
  const pts = (params.get("pts") || "").split("_").map(Number);
  if (pts.length === manifest.playground.lower * 3 * 2 && pts.every(Number.isFinite)) state.toy.pts = pts.map((x) => Math.min(3, Math.max(-3, x)));
  controls();
  await refresh();
}

// What the tests and the benchmark call: the same computation the views draw
window.capsviz = {
  ready: start().catch((e) => {
    $("status").textContent = `The site could not start: ${e.message}`;
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
