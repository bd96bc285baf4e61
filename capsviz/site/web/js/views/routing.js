// The routing view: each iteration's couplings over the image (a CapsNet) or as a matrix
// (Efficient-CapsNet), the class capsules' lengths after each iteration and the couplings' evenness.
// The routing's title and words come from the manifest (capsviz.registry.ROUTINGS).
import { $, bars, el, heat, heatOver, labelled, lines, named, scale } from "../draw.js";
import { argmax, couplingsAt, fmt, lengthsAt, mean, meanCouplings, pairs, percentDigits, placeMaps, range, uniformShare } from "../numbers.js";
import { decide } from "../rules.js";
import { iterationsShown, shown, site, state } from "../store.js";
import { fill, say, sentences } from "../words.js";

// rule `name` of the manifest's table (capsviz.analysis.rules) on `values`, as words ("" for a case without)
function ruled(name, values) {
  const r = decide(site.manifest.rules, name, values);
  return fill(r.words, r.placeholders);
}

export async function render() {
  const m = site.model;
  const current = shown.current;
  const routings = site.manifest.routings;
  const dynamic = routings[current.rule].iterative;
  $("rule-pick").hidden = routings[m.routing].iterative; // only a model with its own one-pass routing can be routed by agreement instead
  $("iterations").disabled = !dynamic;
  $("t").disabled = !dynamic;
  const T = iterationsShown();
  state.t = Math.min(state.t, T);
  $("iterations").value = String(state.iterations);
  $("iterations-out").textContent = dynamic ? String(state.iterations) : say("one_pass");
  $("t").max = String(T);
  $("t").value = String(state.t);
  $("t-out").textContent = String(state.t);
  $("rule").value = current.rule;
  $("routing-title").textContent = routings[current.rule].title;
  const { I, J } = current;
  const t = dynamic ? state.t - 1 : 0;
  const c = couplingsAt(current, t);
  const share = uniformShare(c, I, J);
  $("iterations").parentElement.hidden = !dynamic;
  $("t").parentElement.hidden = !dynamic || T === 1;
  const uniform = fmt(1 / J, 3);
  $("routing-note").textContent = sentences(
    dynamic ? say("routing_iteration", { t: t + 1, T, J, uniform }) : say("routing_one_pass", { J, uniform }),
    say("routing_evenness", { J }),
    // the app's near-uniform rule, on the class the model predicts after its last iteration
    ruled("near uniform", { evenness: share, share: meanCouplings(c, I, J)[argmax(lengthsAt(current, T))], uniform: 1 / J }),
    say(m.grid ? "routing_maps_grid" : "routing_maps_matrix"),
  );
  const maps = $("maps");
  maps.replaceChildren();
  const lengths = lengthsAt(current, t + 1); // the captions follow the iteration shown
  const after = dynamic ? say("after_iteration", { t: t + 1 }) : say("after_one_pass");
  if (m.grid) {
    const all = placeMaps(c, m.grid, m.types, J);
    const lo = Math.min(...all.map((a) => range(a)[0]));
    const hi = Math.max(...all.map((a) => range(a)[1]));
    all.forEach((one, j) => {
      const canvas = el("canvas");
      heatOver(canvas, one, m.grid, hi, lo, current.pixels, m.in_size);
      const avg = mean(one);
      const [a, b] = range(one);
      named(canvas, say("aria_map", { name: m.classes[j], t: t + 1, mean: fmt(avg, 3), lo: fmt(a, 3), hi: fmt(b, 3), after, length: fmt(lengths[j]) }));
      maps.append(el("figure", {}, canvas, el("figcaption", {}, say("routing_map_caption", { name: m.classes[j], mean: fmt(avg, 3), length: fmt(lengths[j]) }))));
    });
    const span = ruled("small span", { lo, hi, uniform: 1 / J }); // the app's rule: a narrow span's colours exaggerate
    maps.append(el("p", { class: "note" }, say("colour_scale"), " ", scale(lo, hi, 3), ` ${sentences(say("routing_maps_scale", { after }), span)}`));
  } else {
    const [, top] = range(c);
    const canvas = el("canvas", { class: "matrix" });
    heat(canvas, c, I, J, top);
    named(canvas, say("aria_matrix", { I, J, top: fmt(top, 3), values: pairs(m.classes, meanCouplings(c, I, J), 3) }));
    const box = labelled(el("div"), canvas, Array.from({ length: I }, (_, i) => String(i + 1)), m.classes, "");
    maps.append(el("figure", { class: "wide" }, box, el("figcaption", {}, `${say("matrix_caption", { count: I })} `, scale(0, top, 3), ` ${say("dark_to_yellow")}`)));
  }
  const steps = Array.from({ length: T }, (_, k) => k + 1);
  if (T === 1) {
    const title = dynamic ? say("lengths_after_one") : say("lengths_after_pass");
    bars(
      $("iter-lengths"),
      { title, xTitle: say("axis_class"), yTitle: say("axis_length"), labels: m.classes, values: Array.from(lengths), text: Array.from(lengths, (v) => fmt(v)), yRange: [0, 1.1] },
      say("aria_bars", { title, values: pairs(m.classes, lengths) }),
    );
  } else {
    const each = steps.map((n) => lengthsAt(current, n));
    lines(
      $("iter-lengths"),
      {
        title: say("lengths_each"),
        xTitle: say("axis_iteration"),
        yTitle: say("axis_length"),
        x: steps,
        series: m.classes.map((name, j) => ({ name, values: each.map((l) => l[j]) })),
        yRange: [0, 1],
        marker: t + 1,
      },
      say("aria_lines", { T, t: t + 1, values: pairs(m.classes, lengths), last: pairs(m.classes, lengthsAt(current, T)) }),
    );
  }
  const shares = steps.map((n) => 100 * uniformShare(couplingsAt(current, n - 1), I, J));
  const digits = percentDigits(shares); // 100, 99.99 and 99.91 are told apart only by their numbers
  bars(
    $("iter-uniform"),
    {
      title: say("evenness_title"),
      xTitle: dynamic ? say("axis_iteration") : say("axis_one_pass"),
      yTitle: say("axis_evenness"),
      labels: steps.map(String),
      values: shares,
      text: shares.map((v) => `${fmt(v, digits)}%`),
      inside: true,
      yRange: [0, 100],
    },
    say("aria_evenness", { values: pairs(steps.map((n) => (dynamic ? say("aria_iteration", { n }) : say("axis_one_pass"))), shares, digits) }),
  );
}

// app: {render, refresh} of site.js
export function controls(app) {
  const routings = site.manifest.routings;
  $("rule").replaceChildren(...Object.entries(routings).map(([k, r]) => el("option", { value: k }, r.words)));
  $("iterations").max = String(site.manifest.iterations_max);
  $("iterations").addEventListener("input", () => {
    state.iterations = Number($("iterations").value);
    state.t = state.iterations;
    const t0 = performance.now();
    app.render().then(() => shown.timings.iterations.push(performance.now() - t0));
  });
  $("t").addEventListener("input", () => {
    state.t = Number($("t").value);
    app.render();
  });
  $("rule").addEventListener("change", () => {
    state.rule = $("rule").value === site.model.routing ? null : $("rule").value;
    app.refresh();
  });
}
