// The EM view: a matrix-capsule model's class capsules routed by EM (the manifest's em_models),
// each iteration's activations and Fig. 2 of Hinton et al. (2018): how far each vote lies from its
// class capsule's mean pose, weighted by the share R of it that capsule explains.
import { distances, histogramRange, histograms, totals } from "../em.js";
import { $, bars, el, lines, named, paint } from "../draw.js";
import { argmax, fmt, order, pairs } from "../numbers.js";
import { computeEM, imageSet, testImage } from "../runtime.js";
import { site, state } from "../store.js";
import { label, say } from "../words.js";

const BINS = 40;
let kept = { key: null, res: null };

// the image the EM model routes: the drawing when it is of the model's size, else the test image shown
async function input(m) {
  const set = await imageSet(m.images);
  const n = m.channels * m.in_size * m.in_size;
  if (state.drawn && state.drawn.length === n) return { pixels: state.drawn, key: "drawn", said: say("em_your_drawing") };
  const index = Math.min(state.image, set.count - 1);
  return { pixels: testImage(m, set, index), key: `image${index}`, said: say("em_test_image", { index, name: m.classes[set.labels[index]] }) };
}

export async function render() {
  const m = site.manifest.em_models[0];
  const { pixels, key, said } = await input(m);
  if (kept.key !== key || state.drawn) kept = { key, res: await computeEM(m, pixels) };
  const res = kept.res;
  const { T, I, J, H } = res;
  state.em.t = Math.min(Math.max(state.em.t || T, 1), T);
  const t = state.em.t - 1;
  $("em-title").textContent = site.manifest.em.title;
  $("em-t").max = String(T);
  $("em-t").value = String(state.em.t);
  $("em-t-out").textContent = say("of_count", { t: state.em.t, T });
  // its own picture only where the input panel shows another image (a MultiMNIST model's pair)
  $("em-input").parentElement.hidden = site.model.images === m.images;
  paint(named($("em-input"), say("aria_em_input", { said })), pixels, m.in_size, m.channels);
  $("em-input-cap").textContent = say("em_routes", { model: label(m.name), said });
  const dist = distances(res.votes, res.mu, T, I, J, H);
  const { limit, share } = histogramRange(dist);
  $("em-note").textContent = say("em_note", { model: label(m.name), iterations: T, about: site.manifest.em.about, limit: String(limit), share: `${Math.round(100 * share)}%` });
  const mass = totals(res.R, T, I, J);
  const final = res.a.slice((T - 1) * J, T * J);
  const ranked = order(final);
  $("em-said").textContent = measured(m, res, mass, t);
  // activations after each iteration: one line per class capsule
  const steps = Array.from({ length: T }, (_, k) => k + 1);
  const atT = res.a.slice(t * J, (t + 1) * J);
  lines(
    $("em-activations"),
    {
      title: say("em_activations_title"),
      xTitle: say("axis_iteration"),
      yTitle: say("em_activation_axis"),
      x: steps,
      series: m.classes.map((name, j) => ({ name, values: steps.map((n) => res.a[(n - 1) * J + j]) })),
      yRange: [0, 1],
      marker: t + 1,
    },
    say("aria_em_lines", { T, t: t + 1, values: pairs(m.classes, atT) }),
  );
  // Fig. 2: one panel per class capsule, the most active first, one height scale over every iteration
  const counts = histograms(dist, res.R, T, I, J, limit, BINS);
  const top = Math.max(...counts);
  const centres = Array.from({ length: BINS }, (_, k) => ((k + 0.5) * limit) / BINS);
  $("em-hist-title").textContent = say("em_hist_title", { t: t + 1, T });
  const boxes = ranked.map(() => el("div", { class: "chart hist" }));
  $("em-hists").replaceChildren(...boxes); // in the page before drawing, so each chart takes its column's width
  ranked.forEach((j, k) => {
    const box = boxes[k];
    const y = Array.from(counts.subarray((t * J + j) * BINS, (t * J + j + 1) * BINS));
    const [name, activation, total] = [m.classes[j], fmt(atT[j]), fmt(mass[t * J + j], 1)];
    const title = k === 0 ? say("em_winner", { name, activation, total }) : say("em_panel", { name, activation, total });
    bars(
      box,
      {
        title,
        titleSize: 12,
        xTitle: say("em_distance_axis"),
        yTitle: say("em_sum_axis"),
        height: 210,
        xRange: [0, limit],
        at: centres,
        binWidth: limit / BINS,
        values: y,
        colour: k === 0 ? "#0072B2" : "#5a6570",
        hover: centres.map((c, b) => `${say("em_distance_axis")} ${fmt(c, 3)}: R ${fmt(y[b], 2)}`),
        yRange: [0, top * 1.05],
      },
      say("aria_em_histogram", { title, limit, most: fmt(Math.max(...y), 2), at: fmt(centres[y.indexOf(Math.max(...y))], 3) }),
    );
  });
}

// what iteration t (0-based) shows, in one measured sentence: the most active class capsule, the
// others' range, and its share of all assignment, sum_i R_ij over the I lower capsules (as the app says it)
function measured(m, res, mass, t) {
  const { T, J } = res;
  const at = Array.from(res.a.slice(t * J, (t + 1) * J));
  const w = argmax(at);
  const others = at.filter((_, j) => j !== w);
  const all = Array.from(mass.slice(t * J, (t + 1) * J)).reduce((x, y) => x + y, 0);
  const percent = (x) => `${(100 * x).toFixed(1)}%`;
  return say("em_said", {
    t: t + 1,
    T,
    name: m.classes[w],
    activation: fmt(at[w]),
    lo: fmt(Math.min(...others)),
    hi: fmt(Math.max(...others)),
    share: percent(mass[t * J + w] / all),
    uniform: percent(1 / J),
  });
}

// app: {render} of site.js
export function controls(app) {
  $("em-t").addEventListener("input", () => {
    state.em.t = Number($("em-t").value);
    app.render();
  });
  // the EM model's guided tour (js/views/tour.js follows it)
  $("em-tour").addEventListener("click", () => {
    Object.assign(state, { view: "tour", tourOf: site.manifest.em_models[0].name, step: 1 });
    app.render();
  });
}
