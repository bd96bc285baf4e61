// The playground: six lower capsules' 2-D predictions for two or three upper capsules, routed by
// the same routing graphs the models use (the manifest's "dynamic" and "attention"). Before the figure,
// the app's question about where the chosen lower capsule's prediction goes (js/toyask.js).
import { answer } from "../answers.js";
import { ask } from "../asking.js";
import { $, el } from "../draw.js";
import { fmt } from "../numbers.js";
import { route } from "../runtime.js";
import { site, state } from "../store.js";
import { toyId, toyQuestion } from "../toyask.js";
import { say } from "../words.js";

// Okabe-Ito's blue, orange and purple, darkened to 4.5:1 on the page (site.css): told apart without red/green
const UPPER_COLOURS = ["var(--upper1)", "var(--upper2)", "var(--upper3)"];
const NS = "http://www.w3.org/2000/svg";

// the predictions shown, (I, 3, 2) flat: the link's or the student's own, else the preset's
export function toyPoints() {
  return state.toy.pts || site.manifest.playground.presets[state.toy.preset].flat(2);
}

// the (1, J, I, 2) predictions the routing graph takes, from points (I, 3, 2) flat
export function toyVotes(pts, I, J) {
  const uHat = new Float32Array(J * I * 2);
  for (let j = 0; j < J; j++) for (let i = 0; i < I; i++) for (let d = 0; d < 2; d++) uHat[(j * I + i) * 2 + d] = pts[(i * 3 + j) * 2 + d];
  return uHat;
}

function line(x, y, colour, width, opacity, dash) {
  const l = document.createElementNS(NS, "line");
  for (const [k, val] of Object.entries({ x1: 0, y1: 0, x2: x, y2: -y, "stroke-width": width, opacity, "stroke-dasharray": dash || "" })) l.setAttribute(k, val);
  l.style.stroke = colour; // a style, not an attribute: the colours are the page's CSS variables
  return l;
}

function text(x, y, s, colour) {
  const n = document.createElementNS(NS, "text");
  n.setAttribute("x", x);
  n.setAttribute("y", -y);
  n.style.fill = colour;
  n.setAttribute("font-size", "0.22");
  n.textContent = s;
  return n;
}

export async function render(app) {
  const pg = site.manifest.playground;
  const I = pg.lower;
  const J = state.toy.J;
  const pts = toyPoints();
  const dynamic = site.manifest.routings[state.toy.rule].iterative;
  const graph = site.manifest.graphs[dynamic ? "dynamic" : "attention"];
  const r = await route(graph, toyVotes(pts, I, J), [1, J, I, 2]);
  const T = dynamic ? state.toy.T : 1;
  const t = T - 1;
  const c = r.c.data.slice(dynamic ? t * I * J : 0, dynamic ? (t + 1) * I * J : I * J);
  const v = r.v.data.slice(dynamic ? t * J * 2 : 0, dynamic ? (t + 1) * J * 2 : J * 2);
  $("toy-T").disabled = !dynamic;
  $("toy-T-out").textContent = dynamic ? String(T) : say("one_pass");
  pointInputs(app, pts, J);
  const open = asked(app, c, T, J, pts, !dynamic);
  $("toy-body").hidden = !open;
  if (!open) return;
  const svg = $("toy");
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
  const head = el("tr", {}, el("th", {}, say("pg_lower")), ...Array.from({ length: J }, (_, j) => el("th", { style: `color:${UPPER_COLOURS[j]}` }, say("pg_c_to_upper", { number: j + 1 }))));
  const body = Array.from({ length: I }, (_, i) => el("tr", {}, el("th", { scope: "row" }, say("pg_lower_n", { number: i + 1 })), ...Array.from({ length: J }, (_, j) => el("td", {}, fmt(c[i * J + j], 3)))));
  const lengths = Array.from({ length: J }, (_, j) => fmt(Math.hypot(v[j * 2], v[j * 2 + 1])));
  const foot = el("tr", {}, el("th", {}, say("pg_drawn")), ...lengths.map((x) => el("td", {}, x)));
  $("toy-table").replaceChildren(head, ...body, foot);
  svg.setAttribute("aria-label", say("aria_pg_svg", { I, J, lengths: lengths.map((x, j) => `v${j + 1} ${x}`).join(", ") }));
}

// Predict, then see, as the app's playground asks: about the numbers as they are until the student
// answers; once answered, the points move the figure freely until the next preset, routing, number
// of upper capsules or iterations, or lower capsule. -> whether the figure is shown.
let kept = null; // {context, input}: what the question shown is about
function asked(app, c, T, J, pts, attention) {
  const box = $("toy-ask");
  if (!state.ask) {
    box.hidden = true;
    return true;
  }
  const k = state.toy.cap - 1;
  const context = JSON.stringify([state.toy.rule, state.toy.preset, J, T, k]);
  if (!kept || kept.context !== context || !answer(kept.input.qid)) {
    const qid = toyId([context, Array.from(pts.slice(0, site.manifest.playground.lower * 3 * 2))]);
    kept = { context, input: { qid, c: Array.from(c.slice(k * J, (k + 1) * J)), T, k, attention } };
  }
  return ask(box, toyQuestion(kept.input, site.manifest.rules), () => app.render());
}

// the chosen lower capsule's predictions, one number box per upper capsule and axis
function pointInputs(app, pts, J) {
  const pg = site.manifest.playground;
  const inputs = $("cap-inputs");
  inputs.replaceChildren();
  const i = state.toy.cap - 1;
  for (let j = 0; j < J; j++) {
    for (const [d, axis] of [
      [0, "x"],
      [1, "y"],
    ]) {
      const box = el("input", { type: "number", min: String(-pg.limit), max: String(pg.limit), step: "0.1", value: String(pts[(i * 3 + j) * 2 + d]), "aria-label": say("aria_pg_input", { lower: i + 1, upper: j + 1, axis }) });
      box.addEventListener("change", () => {
        const p = toyPoints().slice();
        const val = Math.min(pg.limit, Math.max(-pg.limit, Number(box.value) || 0));
        p[(i * 3 + j) * 2 + d] = Math.round(val * 10) / 10;
        state.toy.pts = p;
        app.render();
      });
      inputs.append(el("label", {}, `${say("pg_input", { number: j + 1, axis })} `, box));
    }
  }
}

// app: {render} of site.js
export function controls(app) {
  const pg = site.manifest.playground;
  const routings = site.manifest.routings;
  $("preset").replaceChildren(...Object.keys(pg.presets).map((p) => el("option", { value: p }, site.manifest.preset_names?.[p] ?? p)));
  $("preset").value = state.toy.preset;
  $("preset").addEventListener("change", () => {
    state.toy.preset = $("preset").value;
    state.toy.pts = null;
    app.render();
  });
  $("uppers").value = String(state.toy.J);
  $("uppers").addEventListener("change", () => {
    state.toy.J = Number($("uppers").value);
    app.render();
  });
  $("toy-rule").replaceChildren(...Object.entries(routings).map(([k, r]) => el("option", { value: k }, r.words)));
  $("toy-rule").value = state.toy.rule;
  $("toy-rule").addEventListener("change", () => {
    state.toy.rule = $("toy-rule").value;
    app.render();
  });
  $("toy-T").max = String(site.manifest.iterations_max);
  $("toy-T").value = String(state.toy.T);
  $("toy-T").addEventListener("input", () => {
    state.toy.T = Number($("toy-T").value);
    app.render();
  });
  $("cap").replaceChildren(...Array.from({ length: pg.lower }, (_, i) => el("option", { value: String(i + 1) }, say("pg_lower_n", { number: i + 1 }))));
  $("cap").value = String(state.toy.cap);
  $("cap").addEventListener("change", () => {
    state.toy.cap = Number($("cap").value);
    app.render();
  });
}
