// The "Why capsules" view: the app's chapter (pages/why.py) on one digit. Shifted or turned, does the
// winning capsule's vector change with the digit while its length stays (equivariance), and what does
// the baseline CNN do; with its parts moved, who still sees the digit. Every changed digit comes from
// the chapter's own changes exported as a graph, every answer from the two models' graphs, and every
// sentence is the app's message filled with these numbers (capsviz/site/words.py).
import { $, bars, el, lines, named, paint } from "../draw.js";
import { pairs, vectorAt } from "../numbers.js";
import { computeFor, decode, imageSet, session, tensor, testImage } from "../runtime.js";
import { site, state } from "../store.js";
import { answers, oneImage, oneImageNumbers } from "../why.js";
import { inline } from "../figures.js";
import { label, say } from "../words.js";

let kept = { key: null, got: null };

// the chapter's settings and this model's baseline CNN, or null when the chapter cannot show the model
function chapter(m) {
  const w = site.manifest.why;
  return w && w.models[m.name] ? { ...w, ...w.models[m.name] } : null;
}

// every change of the digit and both models' outputs for each: computed once per model and image
async function compute(m, ch, pixels) {
  const S = m.in_size;
  const C = m.channels;
  const changed = (await (await session(ch.changes)).run({ image: tensor(pixels, [1, C, S, S]) })).changed.data;
  const n = C * S * S;
  const V = changed.length / n;
  const T = site.manifest.routings[m.routing].iterative ? m.iterations : 1;
  const cnn = await session(ch.baseline);
  const out = { inputs: [], capsules: [], scores: [], features: [] };
  for (let k = 0; k < V; k++) {
    const x = changed.slice(k * n, (k + 1) * n);
    const res = await computeFor(m, x, m.routing);
    const b = await cnn.run({ image: tensor(x, [1, C, S, S]) });
    out.inputs.push(x);
    out.capsules.push(Array.from({ length: res.J }, (_, j) => vectorAt(res, T, j)));
    out.scores.push(Array.from(b.scores.data));
    out.features.push(Array.from(b.features.data));
  }
  return out;
}

function pictures(box, images, captions, S, C, summary) {
  box.replaceChildren(
    ...images.map((x, k) => {
      const c = named(el("canvas"), `${captions[k]}`);
      paint(c, x, S, C);
      return el("figure", {}, c, el("figcaption", {}, captions[k]));
    }),
  );
  named(box, summary);
}

export async function render() {
  const m = site.model;
  const ch = chapter(m);
  $("why-unfit").hidden = Boolean(ch);
  $("why-body").hidden = !ch;
  if (!ch) {
    $("why-unfit").textContent = say("why_unfit", { model: label(m.name) });
    return;
  }
  $("why-models").textContent = say("why_models", { caps: label(m.name), cnn: label(ch.cnn) });
  const set = await imageSet(m.images);
  const pixels = state.drawn || testImage(m, set, state.image);
  const key = `${m.name}|${state.drawn ? "drawn" : state.image}`;
  if (kept.key !== key || state.drawn) kept = { key, got: await compute(m, ch, pixels) };
  const got = kept.got;
  const kind = state.why.change;
  const values = kind === "shift" ? ch.shifts : ch.angles;
  const first = kind === "shift" ? 0 : ch.shifts.length;
  const pick = (a) => a.slice(first, first + values.length);
  const view = oneImage(values, pick(got.capsules), pick(got.scores), pick(got.features));
  const amount = kind === "shift" ? state.why.shift : state.why.angle;
  $("why-change").value = kind;
  $("why-amount").min = String(values[0]);
  $("why-amount").max = String(values[values.length - 1]);
  $("why-amount").step = String(values[1] - values[0]);
  $("why-amount").value = String(amount);
  $("why-amount-label").textContent = kind === "shift" ? say("why_pixels") : say("why_degrees");
  $("why-amount-out").textContent = String(amount);
  const S = m.in_size;
  const unit = (v) => (v ? say(kind === "shift" ? "why_px" : "why_deg", { v }) : "0");
  const captions = values.map(unit);
  const names = m.classes;
  const winner = names[view.capsule];
  pictures($("why-inputs"), pick(got.inputs), captions, S, m.channels, say("aria_why_inputs", { values: captions.join(", ") }));
  const recs = await decode(m, Float32Array.from(view.vectors.flat()), values.map(() => view.capsule));
  const n = m.channels * S * S;
  pictures($("why-recs"), values.map((_, k) => recs.subarray(k * n, (k + 1) * n)), captions, S, m.channels, say("aria_why_recs", { name: winner }));
  const xTitle = site.manifest.why_words.kinds[kind];
  lines(
    $("why-digit"),
    { title: say("why_this_digit"), xTitle, yTitle: say("why_length_or_score"), x: values, series: [{ name: say("why_caps_length"), values: view.lengths }, { name: say("why_cnn_score"), values: view.cnn_score }], yRange: [0, 1.05], marker: amount },
    say("aria_why_digit", { lengths: pairs(captions, view.lengths), scores: pairs(captions, view.cnn_score) }),
  );
  lines(
    $("why-moved"),
    { title: say("why_moved_title"), xTitle, yTitle: say("why_degrees_or_percent"), x: values, series: [{ name: say("why_caps_angle"), values: view.angles }, { name: say("why_cnn_features"), values: view.cnn_features }], marker: amount },
    say("aria_why_moved", { angles: pairs(captions, view.angles, 1), features: pairs(captions, view.cnn_features, 1) }),
  );
  const k = values.indexOf(amount);
  const zero = values.indexOf(0);
  const dims = view.vectors[zero].map((_, d) => `d${d}`);
  bars(
    $("why-dims"),
    {
      title: say("why_dims_title"),
      xTitle: say("why_dimension"),
      yTitle: say("why_value"),
      labels: dims,
      groups: [
        { name: say("why_unchanged"), values: view.vectors[zero], colour: "#999999" },
        { name: say("why_changed"), values: view.vectors[k], colour: "#0072B2" },
      ],
    },
    say("aria_why_dims", { unchanged: pairs(dims, view.vectors[zero]), changed: pairs(dims, view.vectors[k]) }),
  );
  $("why-said").textContent = amount !== 0 ? say("why_one_image", oneImageNumbers(view, names, amount, ch.dim_step)) : "";
  // parts in the wrong places: the unchanged digit, then each scheme
  const parts = [0, ...ch.schemes.map((_, s) => ch.shifts.length + ch.angles.length + s)];
  const said = answers(parts.map((p) => got.capsules[p]), parts.map((p) => got.scores[p]));
  const heads = [say("why_original"), ...ch.schemes.map((s) => site.manifest.why_words.scheme_names[s])];
  $("why-parts").replaceChildren(
    ...parts.map((p, i) => {
      const c = named(el("canvas"), heads[i]);
      paint(c, got.inputs[p], S, m.channels);
      const a = said[i];
      const words = [heads[i], say("why_cnn_says", { name: names[a.cnn], score: a.score }), say("why_caps_say", { name: names[a.caps], length: a.length })];
      return el("figure", {}, c, el("figcaption", {}, ...words.flatMap((w, j) => (j ? [el("br"), w] : [w]))));
    }),
  );
  const moved = said.slice(1);
  $("why-parts-said").textContent = say("why_parts_said", {
    cnn_name: names[said[0].cnn],
    cnn: moved.filter((a) => a.cnn === said[0].cnn).length,
    caps_name: names[said[0].caps],
    caps: moved.filter((a) => a.caps === said[0].caps).length,
    n: moved.length,
  });
  $("why-rows-note").innerHTML = inline(say("why_rows"));
  $("why-sweeps").textContent = say("why_sweeps");
  $("why-parts").dataset.answers = JSON.stringify(said); // what the browser tests compare with PyTorch
  $("why-digit").dataset.view = JSON.stringify({ values, lengths: view.lengths, angles: view.angles, cnn_score: view.cnn_score, cnn_features: view.cnn_features, capsule: view.capsule });
}

// app: {render} of site.js
export function controls(app) {
  $("why-change").addEventListener("change", () => {
    state.why.change = $("why-change").value;
    app.render();
  });
  $("why-amount").addEventListener("input", () => {
    const v = Number($("why-amount").value);
    if (state.why.change === "shift") state.why.shift = v;
    else state.why.angle = v;
    app.render();
  });
}
