// The guided tour: the manifest's steps for the open model (capsviz.analysis.tour, exported by
// `capsviz site` with each step's kind, iteration and glossary entries), each drawn by the figure
// of its kind below. A kind the site cannot draw says so; no step falls back on another's figure.
import { $, bars, chart, el, heat, named, paint, scale, table } from "../draw.js";
import { couplingsAt, fmt, lengthsAt, mean, order, pairs, range, uniformShare, vectorAt } from "../numbers.js";
import { computeFor, decode } from "../runtime.js";
import { shown, site, state } from "../store.js";
import { say } from "../words.js";

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
    paint(c, shown.current.pixels, m.in_size, m.channels);
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
    const pixels = shown.current.pixels;
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

export async function render() {
  const m = site.model;
  const steps = m.tour;
  state.step = Math.min(Math.max(state.step, 1), steps.length);
  const step = steps[state.step - 1];
  $("step-of").textContent = say("tour_step", { step: state.step, count: steps.length });
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
  if (!figure) fig.append(el("p", {}, say("tour_no_figure")));
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
