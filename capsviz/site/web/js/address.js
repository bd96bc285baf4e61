// The address: the view as a link, with the app's parameter names (capsviz/site/links.py), read and
// written here. Pure: each reader returns the values it found and its notes ({id, values}: a
// message of words.js), one for every parameter the site does not have or cannot show as asked, so
// a link is never changed silently. tests/address.test.js runs it in node.
import { fmt } from "./numbers.js";
import { label, quoted, say } from "./words.js";

function reader(params, notes) {
  const odd = (name, raw, shown) => notes.push({ id: "link_odd", values: { name, raw: quoted(raw), shown } });
  return {
    odd,
    // a whole number from lo to hi, else `fallback`; with `clamp`, a whole number beyond an end gives that end (as the app reads it)
    int(name, lo, hi, fallback, shown = String(fallback), clamp = false) {
      const raw = params.get(name);
      if (raw === null) return fallback;
      const n = Number(raw);
      if (raw.trim() === "" || !Number.isInteger(n) || n < lo || n > hi) {
        const got = clamp && raw.trim() !== "" && Number.isInteger(n) ? Math.min(Math.max(n, lo), hi) : fallback;
        notes.push({ id: "link_not_whole", values: { name, raw: quoted(raw), lo, hi, shown: got === fallback ? shown : String(got) } });
        return got;
      }
      return n;
    },
    choice(name, allowed, fallback, shown) {
      const raw = params.get(name);
      if (raw === null) return fallback;
      if (allowed.includes(raw)) return raw;
      odd(name, raw, shown);
      return fallback;
    },
  };
}

// What a link asks of the whole site, before any model is open: the view, embedding, the routing,
// the model's name, the model the tour follows (tour=em: the EM model's) and the playground's settings.
export function readSite(params, manifest) {
  const notes = [];
  const r = reader(params, notes);
  const views = manifest.views.map((v) => v.key);
  const routings = Object.keys(manifest.routings);
  const first = manifest.models[0].name;
  const got = {
    view: r.choice("view", views, views[0], manifest.views[0].called),
    embed: r.choice("embed", ["1", "0"], "0", say("shown_full_page")) === "1",
    ask: r.choice("ask", ["1", "0"], "1", say("shown_questions")) === "1", // ask=0: the views without their questions
    // a model with its own routing (Efficient-CapsNet) routed by agreement instead
    rule: r.choice("routing", routings, null, say("shown_own_routing")) === "dynamic" ? "dynamic" : null,
    model: first,
    tourOf: null,
    toy: {
      J: Number(r.choice("J", ["2", "3"], "3", say("shown_three_uppers"))),
      rule: r.choice("rule", routings, "dynamic", say("shown_agreement")),
      preset: Object.keys(manifest.playground.presets)[0],
      T: r.int("T", 1, manifest.iterations_max, 3),
      cap: r.int("cap", 1, manifest.playground.lower, 1),
      pts: null,
    },
  };
  if (manifest.why) {
    // the "Why capsules" view's settings, with the app's names and values (capsviz.analysis.why)
    got.why = {
      change: r.choice("why_change", ["shift", "rotate"], "shift", say("shown_why_change")),
      shift: Number(r.choice("why_shift", manifest.why.shifts.map(String), "4", "4")),
      angle: Number(r.choice("why_angle", manifest.why.angles.map(String), "30", "30")),
    };
  }
  const ems = manifest.em_models || [];
  if (r.choice("tour", ems.length ? ["em"] : [], null, say("shown_model_tour")) === "em") got.tourOf = ems[0].name;
  const model = params.get("model");
  if (model !== null && manifest.models.some((m) => m.name === model)) got.model = model;
  else if (model !== null) r.odd("model", model, say("shown_model", { model: label(first) }));
  const presets = Object.keys(manifest.playground.presets);
  const preset = params.get("preset");
  if (preset !== null && presets.includes(preset)) got.toy.preset = preset;
  else if (preset !== null) r.odd("preset", preset, say("shown_preset", { preset: presets[0] }));
  const pts = readPoints(params.get("pts"), manifest.playground);
  got.toy.pts = pts.pts;
  notes.push(...pts.notes);
  for (const [k, v] of params) if (!manifest.params.includes(k)) notes.push({ id: "link_unknown", values: { name: quoted(k), raw: quoted(v) } });
  return { got, notes };
}

// What a link asks of the open model `m` (a manifest entry) with `count` test images; `rule` the routing
// it is shown with; `view` the view shown (the EM view reads its own iteration: readEM); `steps` the
// tour's steps (the EM model's tour where the tour follows it); a step past the last opens the last.
export function readModel(params, manifest, m, count, rule, view = "explore", steps = m.tour.length) {
  const notes = [];
  const r = reader(params, notes);
  const iterative = manifest.routings[rule].iterative;
  const own = m.routing === rule ? m.iterations : 3; // routed by agreement instead of its own routing: 3 iterations, as the app
  const got = {
    image: r.int("image", 0, count - 1, 0),
    capsule: r.int("capsule", 0, m.classes.length - 1, null, say("shown_longest")),
    iterations: manifest.routings[m.routing].iterative ? m.iterations : 3, // kept for routing=dynamic
    t: 0,
    step: r.int("step", 1, steps, 1, "1", true),
  };
  got.t = got.iterations;
  if (view === "em") {
    // the EM view's iteration: readEM
  } else if (iterative) {
    got.iterations = r.int("iterations", 1, manifest.iterations_max, own);
    got.t = r.int("t", 1, got.iterations, got.iterations);
  } else {
    for (const k of ["iterations", "t"]) {
      if (params.has(k)) notes.push({ id: "link_one_pass", values: { name: k, raw: quoted(params.get(k)), model: label(m.name) } });
    }
  }
  const dims = readDims(params.get("dims"), m.dim);
  got.dims = dims.dims;
  notes.push(...dims.notes);
  return { got, notes };
}

// What a link asks of the EM view: the iteration shown (t, 1 to the EM model's iterations; null: the
// last). Its model routes with its own iterations, so a link asking for others is told so.
export function readEM(params, em) {
  const notes = [];
  const r = reader(params, notes);
  const t = r.int("t", 1, em.iterations, null, String(em.iterations));
  const raw = params.get("iterations");
  if (raw !== null && Number(raw) !== em.iterations) {
    notes.push({ id: "link_em_iterations", values: { raw: quoted(raw), model: label(em.name), n: em.iterations } });
  }
  return { got: { t }, notes };
}

// dims=a,b,...: the explorer's slider values, each in [-0.25, 0.25]
export function readDims(raw, D = 16) {
  const dims = new Float32Array(D);
  const notes = [];
  if (raw === null) return { dims, notes };
  const parts = raw.split(",");
  const wrong = [];
  parts.slice(0, D).forEach((x, d) => {
    const v = Number(x);
    const ok = x.trim() !== "" && Number.isFinite(v);
    const shown = ok ? Math.min(0.25, Math.max(-0.25, v)) : 0; // compared before the float32 store rounds it
    dims[d] = shown;
    if (!ok || v !== shown) wrong.push(`d${d}=${quoted(x)} as ${fmt(shown)}`);
  });
  if (parts.length > D) wrong.push(`${parts.length - D} values past d${D - 1} left out`);
  if (wrong.length) notes.push({ id: "link_dims", values: { shown: wrong.join(", ") } });
  return { dims, notes };
}

// pts=x_y_...: the playground's own predictions, 2 numbers for each lower and upper capsule, each in [-limit, limit]
export function readPoints(raw, pg) {
  const notes = [];
  if (raw === null) return { pts: null, notes };
  const want = pg.lower * 3 * 2;
  const pts = raw.split("_").map((x) => (x.trim() === "" ? NaN : Number(x)));
  if (pts.length !== want || !pts.every(Number.isFinite)) {
    notes.push({ id: "link_pts_count", values: { raw: quoted(raw), count: want } });
    return { pts: null, notes };
  }
  const kept = pts.map((x) => Math.min(pg.limit, Math.max(-pg.limit, x)));
  if (kept.some((x, k) => x !== pts[k])) notes.push({ id: "link_pts_range", values: { limit: pg.limit } });
  return { pts: kept, notes };
}

// The link of what is shown: `state` (store.js), the open model's name, and whether its routing is iterative
export function writeLink(state, model, iterative) {
  const q = new URLSearchParams();
  q.set("view", state.view);
  q.set("model", model);
  if (state.drawn === null) q.set("image", String(state.image));
  if (state.capsule !== null) q.set("capsule", String(state.capsule));
  if (state.dims.some((v) => v !== 0)) q.set("dims", Array.from(state.dims, (v) => +v.toFixed(2)).join(","));
  if (state.view === "em") {
    if (state.em.t !== null) q.set("t", String(state.em.t)); // the EM view's iteration
  } else if (iterative) {
    q.set("iterations", String(state.iterations));
    q.set("t", String(state.t));
  }
  q.set("step", String(state.step));
  if (state.tourOf) q.set("tour", "em");
  if (state.view === "why") {
    q.set("why_change", state.why.change);
    q.set("why_shift", String(state.why.shift));
    q.set("why_angle", String(state.why.angle));
  }
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
  if (state.ask === false) q.set("ask", "0");
  if (state.lang) q.set("lang", state.lang); // a shared link opens in the sender's language
  return `?${q}`;
}
