// The guided tour: the manifest's steps for the open model (capsviz.analysis.tour, exported by
// `capsviz site` with each step's kind, iteration and glossary entries), each drawn by the figure
// of its kind below. A kind the site cannot draw says so; no step falls back on another's figure.
import { $, chart, el, heat, layout, named, paint, plot, scale, table } from "../draw.js";
import { couplingsAt, fmt, lengthsAt, mean, order, pairs, range, uniformShare, vectorAt } from "../numbers.js";
import { computeFor, decode } from "../runtime.js";
import { shown, site, state } from "../store.js";

function help(terms) {
  const g = site.manifest.glossary;
  $("step-help").replaceChildren(
    ...terms.flatMap((k) => {
      const t = g[k];
      return t ? [el("dt", {}, t.symbol === t.word ? t.symbol : `${t.symbol} (${t.word})`), el("dd", {}, t.explanation)] : [];
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
    const c = named(el("canvas"), `Feature map ${k + 1}: mean response ${fmt(sums[k] / (S2 * S2), 3)}, strongest ${fmt(top, 3)}`);
    heat(c, map, S2, S2, top);
    s.fig.append(el("figure", {}, c, el("figcaption", {}, `map ${k + 1}`)));
  }
  const which = s.step.kind === "conv1" ? "Conv1's" : "the last convolution's";
  return [
    ["feature maps", `${C1} of ${which}, each ${S2} x ${S2}`],
    ["shown", "the 16 with the largest mean"],
    ["colour", "0 (dark) to each map's own maximum (yellow)"],
  ];
}

function classBars(s, values, title, y, summary) {
  const m = s.m;
  plot(chart(s.fig), [{ type: "bar", x: m.classes, y: Array.from(values), marker: { color: "#0072B2" } }], layout(title, "class capsule", y, { yaxis: { range: [0, 1] } }), summary);
}

// one figure per step kind: each draws into s.fig and returns the rows of the step's table
const FIGURES = {
  input(s) {
    const m = s.m;
    const c = named(el("canvas"), `The input image, ${m.in_size} x ${m.in_size} pixels`);
    paint(c, shown.current.pixels, m.in_size, m.channels);
    s.fig.append(c);
    return [
      ["size", `${m.in_size} x ${m.in_size} pixels, ${m.channels === 3 ? "colour" : "grey"}`],
      ["values", "0 (black) to 1 (white)"],
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
      const c = named(el("canvas"), `The longest primary capsule at each of the ${G} x ${G} places: lengths from ${fmt(lo, 3)} to ${fmt(hi, 3)}`);
      heat(c, best, G, G, hi, lo);
      s.fig.append(el("figure", {}, c, el("figcaption", {}, "The longest primary capsule at each place: ", scale(lo, hi, 3), " (dark to yellow)")));
      rows.push(["primary capsules", `${I} = ${G} x ${G} places x ${m.types} types`], ["longest at each place", `${fmt(lo, 3)} to ${fmt(hi, 3)}`]);
    } else {
      const names = len.map((_, i) => String(i + 1));
      plot(
        chart(s.fig),
        [{ type: "bar", x: names, y: len, marker: { color: "#0072B2" } }],
        layout("|u_i| of each primary capsule", "primary capsule i", "length |u_i|", { yaxis: { range: [0, 1] } }),
        `Bar chart of the length of each of the ${I} primary capsules: ${pairs(names, len)}.`,
      );
      rows.push(["primary capsules", `${I}, each seeing the whole image`]);
    }
    rows.push(["longest |u_i|", fmt(Math.max(...len))], ["mean |u_i|", fmt(mean(len))]);
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
    plot(
      chart(s.fig),
      [{ type: "bar", x: m.classes, y: avg, marker: { color: "#9aa5b1" } }],
      layout("Mean |u_hat_j|i| for each class capsule", "class capsule j", "mean length |u_hat_j|i|"),
      `Bar chart of the mean length of the predictions for each class capsule: ${pairs(m.classes, avg)}.`,
    );
    return [["predictions", `${I} x ${J}, each of ${D} numbers`]];
  },
  iteration(s) {
    const { m, res, step } = s;
    const t = step.kind === "iteration" ? step.iteration - 1 : 0;
    const c = couplingsAt(res, t);
    const atT = lengthsAt(res, t + 1);
    const title = `|v_j| after this ${step.kind === "iteration" ? "iteration" : "pass"}`;
    classBars(s, atT, title, "length |v_j|", `Bar chart, ${title}: ${pairs(m.classes, atT)}.`);
    const { I, J } = res;
    const rows = order(s.lengths)
      .slice(0, 3)
      .map((j) => {
        let sum = 0;
        for (let i = 0; i < I; i++) sum += c[i * J + j];
        return [`mean c to ${m.classes[j]}`, fmt(sum / I, 3)];
      });
    rows.push(["uniform", `1/${J} = ${fmt(1 / J, 3)}`], ["evenness, % (100 = spread evenly)", fmt(100 * uniformShare(c, I, J), 1)]);
    return rows;
  },
  lengths(s) {
    const { m, lengths } = s;
    classBars(s, lengths, "|v_j|: the answer is the longest", "length |v_j|", `Bar chart of the class capsules' lengths: ${pairs(m.classes, lengths)}.`);
    const [first, second] = order(lengths);
    return [
      ["answer", `${m.classes[first]} (${fmt(lengths[first])})`],
      ["runner-up", `${m.classes[second]} (${fmt(lengths[second])})`],
    ];
  },
  async reconstruction(s) {
    const { m, res } = s;
    const best = order(s.lengths)[0];
    const rec = await decode(m, vectorAt(res, s.T, best), [best]);
    const pixels = shown.current.pixels;
    const a = named(el("canvas"), "The input");
    const b = named(el("canvas"), `The reconstruction from capsule ${m.classes[best]}`);
    paint(a, pixels, m.in_size, m.channels);
    paint(b, rec, m.in_size, m.channels);
    s.fig.append(el("figure", {}, a, el("figcaption", {}, "input")), el("figure", {}, b, el("figcaption", {}, `decoded from ${m.classes[best]}`)));
    let diff = 0;
    for (let p = 0; p < rec.length; p++) diff += Math.abs(rec[p] - pixels[p]);
    return [["mean pixel difference", fmt(diff / rec.length, 3)]];
  },
  lab(s) {
    s.fig.append(el("p", {}, "The routing lab, which runs this model with uniform and random couplings and compares them, is in the full capsviz app (Routing lab page)."));
    return [];
  },
};
FIGURES.routing = FIGURES.iteration; // Efficient-CapsNet's one pass of self-attention

export async function render() {
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
  const current = shown.current;
  const res = current.rule === m.routing ? current : await computeFor(m, current.pixels, m.routing); // the tour follows the model's own routing
  const T = site.manifest.routings[m.routing].iterative ? m.iterations : 1;
  const s = { m, res, step, fig, T, lengths: lengthsAt(res, T) };
  const figure = FIGURES[step.kind];
  const rows = figure ? await figure(s) : [];
  if (!figure) fig.append(el("p", {}, "This step's figure is shown in the full capsviz app's guided tour."));
  table($("step-numbers"), rows);
}

// app: {render} of site.js
export function controls(app) {
  $("back").addEventListener("click", () => {
    state.step -= 1;
    app.render();
  });
  $("forward").addEventListener("click", () => {
    state.step += 1;
    app.render();
  });
}
