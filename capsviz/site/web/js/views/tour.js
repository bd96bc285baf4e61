// The guided tour: the manifest's steps for the open model, or for the EM model (capsviz.analysis.tour,
// exported by `capsviz site` with each step's kind, iteration and glossary entries). For the site's
// first test images each step shows the app's own explanations, table and figure, exported with the
// numbers they quote (capsviz/site/tours.py); otherwise (a later image, a drawing) the step's figure
// and its numbers are computed here, with, for a dynamic-routing CapsNet, an Efficient-CapsNet and the
// EM tour, the sentences of the app's tour that depend only on them (js/said.js), else the sentences the app's rules give on them
// (js/rules.js); a note says what is written only for those first images and how to see it. No step
// shows words written for another image.
// A kind the site cannot draw says so; no step falls back on another's figure.
import { ask } from "../asking.js";
import { $, bars, chart, el, heat, named, paint, scale, table } from "../draw.js";
import { arrowsSvg, inline, planesSvg } from "../figures.js";
import { columnParts, couplingsAt, fmt, lengthsAt, mean, meanCouplings, order, pairs, range, uniformShare, vectorAt } from "../numbers.js";
import { decide } from "../rules.js";
import {
  conv1Text,
  efficientLengthsText,
  efficientPredictionSaid,
  efficientPredictionsText,
  efficientPrimarySaid,
  efficientReconstructionText,
  efficientRoutingSaid,
  efficientTraced,
  emAnswerText,
  emInputText,
  emIterationSaid,
  emTraced,
  inputText,
  iterationSaid,
  lengthsText,
  marginSaid,
  predictionSaid,
  predictionsText,
  primarySaid,
  primaryText,
  reconstructionText,
  traced,
} from "../said.js";
import { computeEM, computeFor, decode, imageSet, inflate, testImage, why } from "../runtime.js";
import { shown, site, state } from "../store.js";
import { fill, label, say, sentences } from "../words.js";

// rule `name` of the manifest's table (capsviz.analysis.rules) on `values`, as words ("" for a case without)
function ruled(name, values) {
  const r = decide(site.manifest.rules, name, values);
  return fill(r.words, r.placeholders);
}

function help(terms) {
  const g = site.manifest.glossary;
  $("step-help").replaceChildren(
    ...terms.flatMap((k) => {
      const t = g[k];
      const name = t && (t.heading || (t.symbol === t.word ? t.symbol : `${t.symbol} (${t.word})`)); // a language's words name the English term too
      return t ? [el("dt", {}, name), el("dd", {}, t.explanation)] : [];
    }),
  );
}

function features(s) {
  const f = s.res.features; // (1, S', S', C) NHWC
  if (!f) return [];
  const [, S2, , C1] = f.dims;
  const sums = new Float32Array(C1);
  for (let p = 0; p < S2 * S2; p++) for (let k = 0; k < C1; k++) sums[k] += f.data[p * C1 + k];
  for (const k of order(sums).slice(0, 16)) {
    const map = new Float32Array(S2 * S2);
    let top = 0;
    for (let p = 0; p < S2 * S2; p++) top = Math.max(top, (map[p] = f.data[p * C1 + k]));
    const c = named(el("canvas"), say("aria_feature_map", { number: k + 1, mean: fmt(sums[k] / (S2 * S2), 3), top: fmt(top, 3) }));
    heat(c, map, S2, S2, top);
    s.fig.append(el("figure", {}, c, el("figcaption", {}, say("tour_map", { number: k + 1 }))));
  }
  const which = s.step.kind === "conv1" ? say("tour_conv1_maps", { count: C1, size: S2 }) : say("tour_last_maps", { count: C1, size: S2 });
  return [
    [say("tour_feature_maps"), which],
    [say("tour_shown"), say("tour_shown_16")],
    [say("tour_colour"), say("tour_colour_map")],
  ];
}

function classBars(s, values, title, y, summary) {
  const m = s.m;
  bars(chart(s.fig), { title, xTitle: say("axis_class"), yTitle: y, labels: m.classes, values: Array.from(values), yRange: [0, 1] }, summary);
}

// one figure per step kind: each draws into s.fig and returns the rows of the step's table
const FIGURES = {
  input(s) {
    const m = s.m;
    const c = named(el("canvas"), say("aria_input_image", { size: m.in_size }));
    paint(c, s.pixels, m.in_size, m.channels);
    s.fig.append(c);
    return [
      [say("tour_size"), m.channels === 3 ? say("tour_size_colour", { size: m.in_size }) : say("tour_size_grey", { size: m.in_size })],
      [say("tour_values"), say("tour_values_range")],
    ];
  },
  conv1: features,
  convs: features,
  primary(s) {
    const { m, res } = s;
    const I = res.I;
    const K = res.u.length / I;
    const len = Array.from({ length: I }, (_, i) => Math.hypot(...res.u.slice(i * K, (i + 1) * K)));
    const rows = [];
    if (m.grid) {
      const G = m.grid;
      const best = new Float32Array(G * G);
      for (let p = 0; p < G * G; p++) best[p] = Math.max(...len.slice(p * m.types, (p + 1) * m.types));
      // the scale runs from the shortest to the longest shown: near-saturated lengths (0.97 to 1.00) still differ in colour
      const [lo, hi] = range(best);
      const c = named(el("canvas"), say("aria_longest_places", { grid: G, lo: fmt(lo, 3), hi: fmt(hi, 3) }));
      heat(c, best, G, G, hi, lo);
      s.fig.append(el("figure", {}, c, el("figcaption", {}, `${say("tour_longest_place")} `, scale(lo, hi, 3), ` ${say("dark_to_yellow")}`)));
      rows.push([say("tour_primary"), say("tour_primary_grid", { count: I, grid: G, types: m.types })], [say("tour_longest_at_place"), say("tour_from_to", { lo: fmt(lo, 3), hi: fmt(hi, 3) })]);
    } else {
      const names = len.map((_, i) => String(i + 1));
      bars(
        chart(s.fig),
        { title: say("tour_primary_title"), xTitle: say("tour_primary_axis"), yTitle: say("tour_primary_length"), labels: names, values: len, yRange: [0, 1] },
        say("aria_primary_lengths", { count: I, values: pairs(names, len) }),
      );
      rows.push([say("tour_primary"), say("tour_primary_whole", { count: I })]);
    }
    rows.push([say("tour_longest_u"), fmt(Math.max(...len))], [say("tour_mean_u"), fmt(mean(len))]);
    return rows;
  },
  predictions(s) {
    const { m, res } = s;
    const { I, J, D } = res;
    const avg = Array.from({ length: J }, (_, j) => {
      let t = 0;
      for (let i = 0; i < I; i++) t += Math.hypot(...res.uHat.slice((j * I + i) * D, (j * I + i + 1) * D));
      return t / I;
    });
    bars(
      chart(s.fig),
      { title: say("tour_predictions_title"), xTitle: say("tour_predictions_axis"), yTitle: say("tour_predictions_length"), labels: m.classes, values: avg, colour: "#9aa5b1" },
      say("aria_predictions", { values: pairs(m.classes, avg) }),
    );
    return [[say("tour_predictions"), say("tour_predictions_count", { I, J, D })]];
  },
  iteration(s) {
    const { m, res, step } = s;
    const t = step.kind === "iteration" ? step.iteration - 1 : 0;
    const c = couplingsAt(res, t);
    const atT = lengthsAt(res, t + 1);
    const title = step.kind === "iteration" ? say("tour_after_iteration") : say("tour_after_pass");
    classBars(s, atT, title, say("axis_length"), say("aria_bars", { title, values: pairs(m.classes, atT) }));
    const { I, J } = res;
    const rows = order(s.lengths)
      .slice(0, 3)
      .map((j) => {
        let sum = 0;
        for (let i = 0; i < I; i++) sum += c[i * J + j];
        return [say("tour_mean_c", { name: m.classes[j] }), fmt(sum / I, 3)];
      });
    rows.push([say("tour_uniform"), `1/${J} = ${fmt(1 / J, 3)}`], [say("tour_evenness"), fmt(100 * uniformShare(c, I, J), 1)]);
    if (s.own && !s.said) {
      // without the app's words: the sentences the app's rules give on this image's numbers (js/rules.js)
      const best = order(s.lengths)[0];
      const said = [ruled("near uniform", { evenness: uniformShare(c, I, J), share: meanCouplings(c, I, J)[best], uniform: 1 / J })];
      if (step.kind === "iteration" && t > 0) {
        const [first, now] = [lengthsAt(res, 1)[best], atT[best]];
        const trend = ruled("rises / falls, 0 to 1", { change: now - first });
        said.push(say("tour_length_since", { name: m.classes[best], trend, first: fmt(first), now: fmt(now), t: t + 1 }));
      }
      s.fig.append(el("p", { class: "note rule-caption" }, sentences(...said)));
    }
    return rows;
  },
  lengths(s) {
    const { m, lengths } = s;
    classBars(s, lengths, say("tour_lengths_title"), say("axis_length"), say("aria_class_lengths", { values: pairs(m.classes, lengths) }));
    const [first, second] = order(lengths);
    return [
      [say("tour_answer"), `${m.classes[first]} (${fmt(lengths[first])})`],
      [say("tour_runner_up"), `${m.classes[second]} (${fmt(lengths[second])})`],
    ];
  },
  async reconstruction(s) {
    const { m, res } = s;
    const best = order(s.lengths)[0];
    const rec = await decode(m, vectorAt(res, s.T, best), [best]);
    const pixels = s.pixels;
    const a = named(el("canvas"), say("input_title"));
    const b = named(el("canvas"), say("aria_reconstruction_from", { name: m.classes[best] }));
    paint(a, pixels, m.in_size, m.channels);
    paint(b, rec, m.in_size, m.channels);
    s.fig.append(el("figure", {}, a, el("figcaption", {}, say("fig_input"))), el("figure", {}, b, el("figcaption", {}, say("tour_decoded", { name: m.classes[best] }))));
    let diff = 0;
    for (let p = 0; p < rec.length; p++) diff += Math.abs(rec[p] - pixels[p]);
    return [[say("tour_difference"), fmt(diff / rec.length, 3)]];
  },
  lab(s) {
    s.fig.append(el("p", {}, say("tour_lab")));
    return [];
  },
};
FIGURES.routing = FIGURES.iteration; // Efficient-CapsNet's one pass of self-attention

// the input's picture as a data URL, for a figure drawn over it
function picture(pixels, m) {
  const c = el("canvas");
  paint(c, pixels, m.in_size, m.channels);
  return c.toDataURL();
}

function captioned(s, node, caption) {
  s.fig.append(el("figure", { class: "app-figure" }, node, ...(caption ? [el("figcaption", { class: "note" }, caption)] : [])));
}

function svgBox(markup, summary) {
  const box = named(el("div", { class: "svg-figure" }), summary);
  box.innerHTML = markup;
  return box;
}

// the app's figures, drawn from the numbers exported with its words (capsviz/site/tours.py)
const APP_FIGURES = {
  arrows(s, d, said) {
    const G = d.lengths.length;
    const all = d.lengths.flat();
    const svg = arrowsSvg(d.lengths, d.directions, 300, picture(s.pixels, s.m));
    captioned(s, svgBox(svg, say("aria_arrows", { grid: G, lo: fmt(Math.min(...all), 3), hi: fmt(Math.max(...all), 3) })), said.caption);
  },
  grid(s, d, said) {
    const top = Math.max(...d.values.flat(), 1e-8);
    const cell = (v, red) => {
      const level = Math.round(255 - (180 * v) / top);
      const style = `background: rgb(${red ? `255, ${level}, ${level}` : `${level}, ${level}, 255`}); color: ${level < 150 ? "#fff" : "#000"}`;
      return el("td", { style }, fmt(v));
    };
    const grid = el(
      "table",
      { class: "grid" },
      el("tr", {}, el("th", {}), ...d.columns.map((c) => el("th", { scope: "col" }, String(c)))),
      ...d.rows.map((r, i) => el("tr", {}, el("th", { scope: "row" }, r), ...d.values[i].map((v, k) => cell(v, i === d.highlight_row || k === d.highlight)))),
    );
    captioned(s, el("div", { class: "grid-box" }, el("p", { class: "grid-title" }, d.title), grid), said.caption);
  },
  bars(s, d, said) {
    const top = Math.max(1, ...d.values);
    const lines = Object.entries(d.lines || {}).map(([name, value]) => ({ name, value }));
    const box = chart(s.fig);
    bars(
      box,
      {
        title: d.title,
        xTitle: s.step.kind === "primary" ? say("tour_primary_axis") : say("axis_class"),
        yTitle: d.axis,
        labels: d.names.map(String),
        values: d.values,
        colours: d.values.map((_, j) => (j === d.highlight ? "#d62728" : "#0072B2")),
        text: d.values.map((v) => fmt(v)),
        lines,
        yRange: [0, top * 1.1],
      },
      say("aria_bars", { title: d.title, values: pairs(d.names, d.values) }),
    );
    if (said.caption) box.after(el("p", { class: "note" }, said.caption));
  },
  lab(s, d, said) {
    // each bar with its error bar: two standard errors, as the caption says
    const charts = [["error", "spread", say("lab_error_title"), say("lab_error_axis")]];
    if (d.pairs) charts.push(["pairs", "pair_spread", say("lab_pairs_title"), say("lab_pairs_axis")]);
    for (const [key, spread, title, axis] of charts) {
      const errors = d[spread] || d[key].map(() => 0);
      const top = Math.max(...d[key].map((v, k) => v + errors[k]));
      bars(
        chart(s.fig),
        { title, xTitle: say("axis_routing"), yTitle: axis, labels: d.routing_names, values: d[key], errors, text: d[key].map((v) => fmt(v)), yRange: [0, top * 1.2 || 1] },
        say("aria_bars", { title, values: pairs(d.routing_names, d[key]) }),
      );
    }
    s.fig.append(el("p", { class: "note" }, said.caption));
  },
  em_primary(s, d, said) {
    const [H, W] = [d.maps[0].length, d.maps[0][0].length];
    d.maps.forEach((map, k) => {
      const c = named(el("canvas"), say("aria_em_type", { number: k + 1, top: fmt(Math.max(...map.flat()), 3) }));
      heat(c, map.flat(), H, W, 1, 0);
      s.fig.append(el("figure", {}, c, el("figcaption", {}, say("tour_type", { k: k + 1 }))));
    });
    s.fig.append(el("p", { class: "note" }, `${say("tour_em_maps")} `, scale(0, 1, 0)));
    const pose = el("table", { class: "pose" }, ...d.pose.map((row) => el("tr", {}, ...row.map((v) => el("td", {}, fmt(v, 3))))));
    s.fig.append(el("figure", { class: "app-figure" }, pose, el("figcaption", { class: "note" }, said.caption)));
  },
  routing(s, d, said) {
    const labels = d.uppers.map((name, j) => [name, `|s| = ${d.s_len[j]}   |v| = ${d.v_len[j]}`]); // written as the sentences write them
    const width = Math.min(640, s.fig.clientWidth || 640);
    const summary = say("aria_planes", { title: d.title, values: d.uppers.map((u, j) => `${u}: |s| ${d.s_len[j]}, |v| ${d.v_len[j]}`).join("; ") });
    captioned(s, el("div", {}, el("p", { class: "grid-title" }, d.title), el("p", { class: "note" }, say("tour_legend_dynamic")), el("p", { class: "note" }, say("tour_axes_dynamic")), svgBox(planesSvg(d, labels, width), summary), el("p", { class: "note" }, d.note)), said.caption);
  },
  em(s, d, said) {
    const labels = d.uppers.map((name, j) =>
      d.fit ? [name, say("tour_plane_em", { a: d.a[j], x: d.spread[j][0], y: d.spread[j][1] })] : [name, ""],
    );
    const width = Math.min(640, s.fig.clientWidth || 640);
    const summary = say("aria_planes", { title: d.title, values: d.uppers.map((u, j) => `${u}: a ${d.a[j]}`).join("; ") });
    const legend = d.fit ? say("tour_legend_em") : say("tour_legend_votes");
    const parts = [el("p", { class: "grid-title" }, d.title), el("p", { class: "note" }, legend), el("p", { class: "note" }, say("tour_axes_em")), svgBox(planesSvg(d, labels, width), summary)];
    if (d.note) parts.push(el("p", { class: "note" }, d.note));
    captioned(s, el("div", {}, ...parts), said.caption);
  },
};
APP_FIGURES.votes = APP_FIGURES.em;

// The EM tour's figures for an image without the app's words: what the EM graphs give here
const EM_FIGURES = {
  input: FIGURES.input,
  iteration(s) {
    const { m, em, step } = s;
    const t = step.iteration - 1;
    const a = em.a.slice(t * em.J, (t + 1) * em.J);
    const title = say("em_activations_at", { t: t + 1, T: em.T });
    bars(chart(s.fig), { title, xTitle: say("axis_class"), yTitle: say("em_activation_axis"), labels: m.classes, values: Array.from(a), text: Array.from(a, (v) => fmt(v)), yRange: [0, 1] }, say("aria_bars", { title, values: pairs(m.classes, a) }));
    return [];
  },
  activations(s) {
    const { m, em } = s;
    const a = em.a.slice((em.T - 1) * em.J, em.T * em.J);
    const title = say("em_activations_at", { t: em.T, T: em.T });
    bars(chart(s.fig), { title, xTitle: say("axis_class"), yTitle: say("em_activation_axis"), labels: m.classes, values: Array.from(a), text: Array.from(a, (v) => fmt(v)), yRange: [0, 1] }, say("aria_bars", { title, values: pairs(m.classes, a) }));
    const best = order(a)[0];
    return [[say("tour_answer"), `${m.classes[best]} (${fmt(a[best])})`]];
  },
};

// the model the tour follows: the open one, or the EM model (state.tourOf)
export function followed() {
  return (state.tourOf && site.manifest.em_models.find((m) => m.name === state.tourOf)) || site.model;
}

// the image the followed model sees: the drawing when it is of its size, else its test image
async function pixelsFor(m) {
  const n = m.channels * m.in_size * m.in_size;
  if (state.drawn) return state.drawn.length === n ? state.drawn : null;
  const set = await imageSet(m.images);
  return testImage(m, set, Math.min(state.image, set.count - 1));
}

const explanations = new Map(); // a words file -> Promise of its steps for each explained image
// whether the page writes the app's tour sentences for model m on any image (js/said.js): a
// single-image CapsNet whose dynamic routing, the tour's, is the one it was trained with, an
// Efficient-CapsNet, or a matrix-capsule model (EM)
function writesSaid(m) {
  if (!m.explained || !site.manifest.tour_said) return false;
  if (m.routing === "em") return true;
  if (m.family === "efficient") return m.digits === 1;
  return m.family === "capsnet" && m.routing === "dynamic" && m.own_routing && m.digits === 1;
}

// a drawing has no label: the longest capsule; else the test image's label
async function labelOf(m) {
  return state.drawn ? null : (await imageSet(m.images)).labels[state.image];
}

// Efficient-CapsNet's steps: {text, measured, warn}, or null for a step whose sentences all need the app
async function efficientSaid(s, S, words) {
  const { m, step, res } = s;
  const tr = efficientTraced(res);
  const names = m.classes.map(String);
  const kind = step.kind;
  if (kind === "primary") return { text: [], measured: efficientPrimarySaid(S, tr), warn: false };
  if (kind === "predictions") return { text: efficientPredictionsText(S, tr), measured: efficientPredictionSaid(S, tr, names), warn: false };
  if (kind === "routing") return { text: [], measured: efficientRoutingSaid(S, tr, names), warn: false };
  if (kind === "lengths") {
    const right = await labelOf(m);
    return { text: efficientLengthsText(S, tr, names, right === null ? null : names[right]), measured: marginSaid(S, tr.lengths, names, right), warn: false };
  }
  if (kind === "reconstruction") return { text: efficientReconstructionText(S, tr, names, words("shown")), measured: "", warn: false };
  return null;
}

// The EM tour's steps: {text, measured, warn}, or null for a step whose sentences all need the app
async function emSaid(s, S) {
  const { m, step, em } = s;
  const names = m.classes.map(String);
  if (step.kind === "input") return { text: emInputText(S, label(m.name)), measured: "", warn: false };
  if (step.kind === "iteration") return { text: [], measured: emIterationSaid(S, emTraced(em), step.iteration - 1, names), warn: false };
  if (step.kind === "activations") {
    const right = await labelOf(m);
    return { text: emAnswerText(S, emTraced(em), names, right === null ? null : names[right]), measured: "", warn: false };
  }
  return null;
}

// The step's sentences of the app's tour on this image's numbers (js/said.js): {text, measured, warn}, or null for a step without
async function saidFor(s) {
  const { m, step, res } = s;
  const S = site.manifest.tour_said;
  const words = (key) => S.class_words[m.class_words[key]] || m.class_words[key];
  if (m.routing === "em") return emSaid(s, S);
  if (m.family === "efficient") return efficientSaid(s, S, words);
  const digits = m.class_words.digits;
  const tr = traced(res, s.T);
  const names = m.classes.map(String);
  const kind = step.kind;
  const only = (text) => ({ text, measured: "", warn: false });
  if (kind === "input") return only(inputText(S, label(m.name), s.T, words("capsule")));
  if (kind === "conv1") return only(conv1Text(S, digits, res.features.dims[3]));
  if (kind === "primary") return { text: primaryText(S, tr, m.grid, m.types), ...primarySaid(S, tr, m.grid, m.types, words("shown")) };
  if (kind === "predictions") {
    return { text: predictionsText(S, tr, names, digits, words("capsule"), words("thing")), measured: predictionSaid(S, tr, names, m.grid, m.types, words("thing")), warn: false };
  }
  if (kind === "iteration") return { ...iterationSaid(S, tr, step.iteration - 1, names, words("capsule")), warn: false };
  if (kind === "lengths") {
    const right = await labelOf(m);
    const text = lengthsText(S, tr, names, words("capsule"), right === null ? null : names[right]);
    return { text, measured: marginSaid(S, tr.lengths, names, right), warn: false };
  }
  if (kind === "reconstruction") return only(reconstructionText(S, tr, names, digits, words("shown")));
  return null;
}

// what only the build writes of the step, said exactly, beside the sentences the page writes (writesSaid); "" where nothing is missing
function missingNote(m, kind) {
  const v = { n: m.explained.images, last: m.explained.images - 1 };
  const drawn = Boolean(state.drawn);
  // the steps of which the page writes some sentences: what the others need
  const part = { efficient: { primary: "tour_missing_efficient_primary", routing: "tour_missing_efficient_routing" }, em: { iteration: "tour_missing_em_iteration" } };
  const missing = (part[m.routing === "em" ? "em" : m.family] || {})[kind];
  if (missing) return say(drawn ? "tour_said_drawing_part" : "tour_said_first_part", { ...v, missing: say(missing) });
  if (m.routing === "em" && kind === "activations") return say(drawn ? "tour_said_drawing_em_answer" : "tour_said_first_em_answer", v);
  if (kind === "primary" || kind === "predictions") return say(drawn ? "tour_said_drawing_figure" : "tour_said_first_figure", v);
  if (kind === "iteration") return say(drawn ? "tour_said_drawing_table" : "tour_said_first_table", v);
  if (kind === "lengths") return say(drawn ? "tour_said_drawing_answer" : "tour_said_first_question", v);
  return "";
}

// The app's words for the image shown, or null with the reason said: {steps, note}
async function explainedFor(m) {
  const ex = m.explained;
  if (!ex) return { steps: null, note: say("tour_words_none", { model: label(m.name) }) };
  if (state.drawn) return { steps: null, note: say("tour_words_drawing", { n: ex.images, last: ex.images - 1 }) };
  if (state.image >= ex.images) return { steps: null, note: say("tour_words_first", { n: ex.images, last: ex.images - 1 }) };
  const file = ex.files[state.lang] || ex.files.en;
  if (!explanations.has(file)) {
    const got = inflate(file).then((raw) => JSON.parse(new TextDecoder().decode(raw)));
    got.catch(() => explanations.delete(file)); // tried again on the next step
    explanations.set(file, got);
  }
  try {
    return { steps: (await explanations.get(file))[state.image], note: "" };
  } catch (e) {
    console.error(e); // the browser's words for whoever debugs the host; the page says what to do
    const [cause, todo] = why(e);
    return { steps: null, note: say("tour_words_failed", { cause: say(cause), todo: say(todo) }) };
  }
}

// the step's explanations: the app's paragraphs (a little Markdown), its measured sentence and its table
function explain(app, note) {
  const text = $("step-text");
  text.replaceChildren(...(app ? app.text : []).map((p) => Object.assign(el("p"), { innerHTML: inline(p) })));
  if (note) text.append(el("p", { class: "note" }, note));
  const measured = $("step-measured");
  measured.hidden = !(app && app.measured);
  measured.className = app && app.warn ? "measured warn" : "measured";
  measured.innerHTML = app && app.measured ? inline(app.measured) : "";
  const t = app && app.table;
  // the row names in every part, the numbers beside them stacked in parts that fit the screen
  const parts = t ? columnParts(t.columns.length - 1, PHONE.matches ? PHONE_NUMBERS : Infinity).map((p) => [0, ...p.map((c) => c + 1)]) : [];
  const part = (cols) =>
    el(
      "table",
      { class: "step-table" },
      el("tr", {}, ...cols.map((c) => el("th", { scope: "col" }, t.columns[c]))),
      ...t.rows.map((r) => el("tr", {}, ...cols.map((c) => el("td", {}, r[c])))),
    );
  $("step-table").replaceChildren(...parts.map(part));
}

const PHONE = window.matchMedia("(max-width: 500px)"); // a phone held upright
const PHONE_NUMBERS = 3; // numbers a table row shows beside its name there: a 390 px screen shows them without scrolling

export async function render() {
  const m = followed();
  const em = m.routing === "em";
  const steps = m.tour;
  state.step = Math.min(Math.max(state.step, 1), steps.length);
  const step = steps[state.step - 1];
  $("step-of").textContent = say("tour_step", { step: state.step, count: steps.length });
  $("back").disabled = state.step === 1;
  $("forward").disabled = state.step === steps.length;
  $("step-title").textContent = step.title;
  $("tour-of").value = m.name;
  const fig = $("step-figure");
  fig.replaceChildren();
  const { steps: said, note } = await explainedFor(m);
  const app = said && said[state.step - 1];
  help(app ? app.terms : step.terms);
  // predict, then see: the app's question for this step first, the step once answered
  const q = app && app.question && state.ask ? app.question : null;
  const open = q ? ask($("tour-ask"), q, () => redrawTour()) : true;
  if (!q) $("tour-ask").hidden = true;
  $("step-body").hidden = !open;
  if (!open) return;
  const pixels = await pixelsFor(m);
  if (pixels === null) {
    // a drawing made for another model's size (a MultiMNIST model's): the EM model cannot read it
    fig.append(el("p", {}, say("tour_em_drawing", { model: label(m.name), size: m.in_size })));
    explain(null, "");
    table($("step-numbers"), []);
    return;
  }
  let s;
  if (em) {
    s = { m, step, fig, pixels, em: await computeEM(m, pixels), said: !app && writesSaid(m) };
  } else {
    const current = shown.current;
    const res = current.rule === m.routing ? current : await computeFor(m, current.pixels, m.routing); // the tour follows the model's own routing
    const T = site.manifest.routings[m.routing].iterative ? m.iterations : 1;
    s = { m, res, step, fig, T, pixels: current.pixels, lengths: lengthsAt(res, T), own: !app, said: !app && writesSaid(m) };
  }
  // the page writes the app's sentences on this image's numbers: it has no exported words (null: none for this step)
  const written = s.said ? await saidFor(s) : null;
  const writes = written !== null;
  let rows = [];
  let drawn = true;
  if (app && APP_FIGURES[app.figure]) {
    APP_FIGURES[app.figure](s, app.data, app);
  } else {
    const figure = (em ? EM_FIGURES : FIGURES)[step.kind];
    if (figure) rows = await figure(s);
    else fig.append(el("p", {}, em && m.explained ? say("tour_em_no_figure", { n: m.explained.images, last: m.explained.images - 1 }) : say("tour_no_figure")));
    drawn = Boolean(figure) && step.kind !== "lab"; // the lab step's "figure" is a pointer to the app
  }
  if (writes) explain(written, drawn ? missingNote(m, step.kind) : "");
  else explain(app, drawn ? note : ""); // the note says the step shows its own figure: not on a step that has none
  table($("step-numbers"), rows);
}

let redrawTour = null; // the page's render, which a question's Commit and Skip call

// app: {render} of site.js
export function controls(app) {
  redrawTour = app.render;
  $("back").addEventListener("click", () => {
    state.step -= 1;
    app.render();
  });
  $("forward").addEventListener("click", () => {
    state.step += 1;
    app.render();
  });
  PHONE.addEventListener("change", () => state.view === "tour" && app.render()); // turned: the tables restack
  const ems = site.manifest.em_models || [];
  $("tour-of").parentElement.hidden = !ems.length; // with no matrix-capsule model there is one tour
  $("tour-of").addEventListener("change", () => {
    const name = $("tour-of").value;
    state.tourOf = ems.some((m) => m.name === name) ? name : null;
    state.step = 1;
    app.render();
  });
}

// the models the tour can follow: the open one and each EM model (site.js calls it when the model changes)
export function followable() {
  const ems = site.manifest.em_models || [];
  $("tour-of").replaceChildren(...[site.model, ...ems].map((m) => el("option", { value: m.name }, label(m.name))));
  $("tour-of").value = followed().name;
}
