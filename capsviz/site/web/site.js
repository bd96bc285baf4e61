// capsviz's static site: the core views, the models computing in the browser with onnxruntime-web.
// Every number comes from the ONNX graphs that `capsviz site` exported from the PyTorch code, and
// every view, routing, tour step and sentence from its manifest (site.json). This file opens the
// site and wires the views (js/views/*), which read and change the one state (js/store.js).
import { readEM, readModel, readSite, writeLink } from "./js/address.js";
import { $, el } from "./js/draw.js";
import { argmax, lengthsAt, order, vectorAt } from "./js/numbers.js";
import { pickLanguage } from "./js/lang.js";
import { keepOffline, watchUpdates } from "./js/offline.js";
import { SiteError, bytes, computeEM, computeFor, decode, imageSet, onProgress, prepare, startRuntime, testImage, why } from "./js/runtime.js";
import { ruleOf, shown, site, state } from "./js/store.js";
import * as em from "./js/views/em.js";
import * as explore from "./js/views/explore.js";
import * as input from "./js/views/input.js";
import * as playground from "./js/views/playground.js";
import * as routing from "./js/views/routing.js";
import * as tour from "./js/views/tour.js";
import * as chapter from "./js/views/why.js";
import { label, say, sentences, useMessages } from "./js/words.js";

const VIEWS = { explore, routing, tour, why: chapter, playground, em }; // the manifest's views, each by its module
const params = new URLSearchParams(location.search);

// The address follows the view a moment after its last change: a burst of key presses on a slider
// writes it once, and no press waits for the browser's history
let addressLater = null;
function writeAddress() {
  clearTimeout(addressLater);
  addressLater = setTimeout(() => {
    history.replaceState(null, "", writeLink(state, site.model.name, shown.current && site.manifest.routings[shown.current.rule].iterative));
  }, 150);
}

function sayStatus() {
  $("status").textContent = sentences(shown.problem, ...shown.notes);
}

function note(notes) {
  for (const n of notes) {
    shown.asked.push(n);
    shown.notes.push(say(n.id, n.values));
  }
}

// the words of each language (the manifest's languages: words-<lang>.json), fetched once when first shown
const wordsFetched = new Map();
function wordsOf(lang) {
  if (!wordsFetched.has(lang)) {
    const file = site.manifest.languages[lang].words;
    wordsFetched.set(
      lang,
      bytes(file).then((raw) => JSON.parse(new TextDecoder().decode(raw))),
    );
  }
  return wordsFetched.get(lang);
}

// the page's own words (index.html's elements marked data-w, data-w-label) in the language of the messages in use
function sayMarked() {
  for (const node of document.querySelectorAll("[data-w]")) node.textContent = say(node.dataset.w);
  for (const node of document.querySelectorAll("[data-w-label]")) node.setAttribute("aria-label", say(node.dataset.wLabel));
}

// every word on the page in the language of `w` (a words-<lang>.json): the manifest's, the page's own (data-w) and <html lang>
function useWords(w) {
  const man = site.manifest;
  Object.assign(man, { views: w.views, em: w.em, routings: { ...man.routings, ...w.routings }, rules: w.rules, messages: w.messages, glossary: w.glossary, why_words: w.why_words, tour_said: w.tour_said });
  for (const m of [...man.models, ...(man.em_models || [])]) (w.tours[m.name] || []).forEach((title, k) => m.tour[k] && (m.tour[k].title = title));
  useMessages(w.messages, w.lang, w.counted);
  state.lang = w.lang;
  document.documentElement.lang = w.lang;
  sayMarked();
  for (const v of man.views) $(v.key).setAttribute("aria-label", v.name);
  for (const b of document.querySelectorAll("nav button")) b.textContent = man.views.find((v) => v.key === b.dataset.view).name;
  for (const pick of [$("rule"), $("toy-rule")]) for (const o of pick.options) o.textContent = man.routings[o.value].words;
  $("lang").value = w.lang;
}

// the switch in the header: every word shown changes, the models and the numbers stay
async function changeLanguage(lang) {
  try {
    useWords(await wordsOf(lang));
  } catch (e) {
    console.error(e);
    wordsFetched.delete(lang);
    $("lang").value = state.lang;
    const [cause, todo] = why(e);
    shown.problem = say("start_failed", { what: site.manifest.languages[lang].words, cause: say(cause), todo: say(todo) });
    sayStatus();
    return;
  }
  shown.notes = shown.asked.map((n) => say(n.id, n.values));
  if (shown.current) {
    const set = await imageSet(site.model.images);
    input.showInput(set, shown.current.pixels);
    if (state.drawn) $("label").textContent = say("input_drawing");
  }
  await render();
  keepOffline();
}

// the input changed: compute again, then draw
async function refresh() {
  const m = site.model;
  const set = await imageSet(m.images);
  const pixels = input.currentPixels(set);
  input.showInput(set, pixels);
  shown.current = await computeFor(m, pixels, ruleOf(m));
  performance.mark("capsviz: computed"); // the benchmark's first inference: the first of these marks
  shown.current.pixels = pixels;
  await render();
}

// a setting changed: draw the view shown
async function render() {
  for (const v of Object.keys(VIEWS)) $(v).hidden = v !== state.view;
  for (const b of document.querySelectorAll("nav button")) b.setAttribute("aria-current", b.dataset.view === state.view ? "page" : "false");
  const view = site.manifest.views.find((v) => v.key === state.view);
  $("input").hidden = !view.input;
  $("model").parentElement.hidden = !view.model; // the picker only where the view shows the model it opens
  input.truthWaitsForAnswer(false); // the explorer says so again while its question waits
  await VIEWS[state.view].render(app);
  writeAddress();
  sayStatus();
}

const app = { render, refresh, writeAddress };

// the progress line while model m opens: what is still to download of it, in MB (each model is fetched only when picked)
async function opening(m) {
  const graphs = [...Object.values(m.graphs), site.manifest.graphs.dynamic].filter((g) => !site.sessions.has(g.onnx));
  let total = graphs.reduce((n, g) => n + (g.bytes || 0), 0);
  if (!site.images.has(m.images)) total += site.manifest.image_sets[m.images].bytes || 0;
  let done = 0;
  const mb = (n) => (n / 2 ** 20).toFixed(1);
  const show = () => {
    $("status").textContent = say("loading_progress", { model: label(m.name), done: mb(Math.min(done, total)), total: mb(total) });
  };
  show();
  onProgress((n) => {
    done += n;
    show();
  });
  try {
    return await prepare(m);
  } finally {
    onProgress(null);
  }
}

async function useModel(name) {
  const m = site.manifest.models.find((x) => x.name === name);
  const set = await opening(m);
  site.model = m;
  state.iterations = site.manifest.routings[m.routing].iterative ? m.iterations : 3;
  state.t = state.iterations;
  state.drawn = null;
  $("model").value = m.name;
  state.image = Math.min(state.image, set.count - 1);
  $("image").max = String(set.count - 1);
  $("image").value = String(state.image);
  return set;
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

function controls() {
  $("views").replaceChildren(...site.manifest.views.map((v) => el("button", { type: "button", "data-view": v.key }, v.name)));
  for (const b of document.querySelectorAll("nav button")) {
    b.addEventListener("click", () => {
      state.view = b.dataset.view;
      render();
    });
  }
  $("model").addEventListener("change", async () => {
    const name = $("model").value;
    const before = site.model;
    try {
      await opening(site.manifest.models.find((x) => x.name === name));
    } catch (e) {
      console.error(e); // the runtime's own words, for whoever debugs the host
      $("model").value = before.name; // the view keeps the model it computed with
      const [cause, todo] = why(e);
      shown.problem = say("model_failed", { model: label(name), cause: say(cause), before: label(before.name), todo: say(todo) });
      sayStatus();
      return;
    }
    shown.problem = "";
    await useModel(name);
    tour.followable();
    state.capsule = null;
    state.dims.fill(0); // another model's capsules: the sliders start again at 0, as for a new image
    await refresh();
    keepOffline();
  });
  input.controls(app);
  for (const v of site.manifest.views) VIEWS[v.key].controls(app);
  tour.followable();
  $("lang").addEventListener("change", () => changeLanguage($("lang").value));
}

async function start() {
  performance.mark("capsviz: start");
  startRuntime();
  const manifest = await readManifest();
  site.manifest = manifest;
  useMessages(manifest.messages, "en", manifest.counted);
  sayMarked(); // in English too: a note index.html leaves empty (the Why capsules chapter's) is the catalog's
  const languages = manifest.languages || { en: { name: "English" } };
  const chosen = pickLanguage(params, navigator.languages || [navigator.language], languages);
  $("lang").replaceChildren(...Object.entries(languages).map(([k, l]) => el("option", { value: k, lang: k }, l.name)));
  $("lang").value = chosen.lang;
  state.lang = chosen.lang;
  if (chosen.lang !== "en") {
    try {
      useWords(await wordsOf(chosen.lang));
    } catch (e) {
      console.error(e); // the page stays in English, which the manifest holds
      state.lang = "en";
      $("lang").value = "en";
    }
  }
  note(chosen.notes);
  const first = readSite(params, manifest);
  note(first.notes);
  Object.assign(state, { view: first.got.view, embed: first.got.embed, rule: first.got.rule, tourOf: first.got.tourOf, ask: first.got.ask });
  if (first.got.why) Object.assign(state.why, first.got.why);
  Object.assign(state.toy, first.got.toy);
  if (state.embed) document.body.classList.add("embed");
  $("model").replaceChildren(...manifest.models.map((m) => el("option", { value: m.name }, label(m.name))));
  let set;
  try {
    set = await useModel(first.got.model);
    performance.mark("capsviz: model open");
  } catch (e) {
    throw Object.assign(e, { model: first.got.model });
  }
  const toured = state.tourOf ? manifest.em_models.find((e) => e.name === state.tourOf) : site.model;
  const asked = readModel(params, manifest, site.model, set.count, ruleOf(site.model), state.view, toured.tour.length);
  note(asked.notes);
  Object.assign(state, asked.got);
  if (state.view === "em") {
    const em = readEM(params, manifest.em_models[0]);
    note(em.notes);
    state.em.t = em.got.t;
  }
  $("image").value = String(state.image);
  controls();
  await refresh();
  performance.mark("capsviz: first view");
  watchUpdates();
}

// what a failed start could not open, as the student reads it: a model, the manifest, one file, or the runtime
function failedWhat(e) {
  const inModel = typeof e.url === "string" && e.url.match(/^models\/([^/]+)\//);
  if (e.model || inModel) return say("what_model", { model: label(e.model || inModel[1]) });
  if (e.url === "site.json") return say("what_manifest");
  if (typeof e.url === "string" && !e.url.startsWith("vendor/")) return say("what_file", { file: e.url });
  return say("what_runtime");
}

const ready = start().catch((e) => {
  console.error(e); // the runtime's own words stay here; the page says what happened and what to do
  const [cause, todo] = why(e);
  const what = failedWhat(e);
  $("status").textContent = say("start_failed", { what, cause: say(cause), todo: say(todo) });
  throw e;
});

// What the tests and the benchmark call: the same computation the views draw
window.capsviz = {
  ready, // the first view drawn
  // then the site kept for offline use (the service worker installs after the first view, not before it)
  offline: ready.then(keepOffline, () => null),
  async compute(name, index, iterations) {
    const m = site.manifest.models.find((x) => x.name === name);
    const set = await imageSet(m.images);
    const res = await computeFor(m, testImage(m, set, index), m.routing);
    const T = site.manifest.routings[m.routing].iterative ? iterations : 1;
    const lengths = lengthsAt(res, T);
    const best = argmax(lengths);
    const rec = await decode(m, vectorAt(res, T, best), [best]);
    return { lengths: Array.from(lengths), couplings: Array.from(res.c.slice(0, T * res.I * res.J)), reconstruction: Array.from(rec) };
  },
  // a MultiMNIST model's answer: its two longest capsules and each one's reconstruction alone
  // a matrix-capsule model's EM routing of test image `index`: every iteration's R, a, mu and sigma
  async computeEM(index) {
    const m = site.manifest.em_models[0];
    const set = await imageSet(m.images);
    const r = await computeEM(m, testImage(m, set, index));
    return { R: Array.from(r.R), a: Array.from(r.a), mu: Array.from(r.mu), sigma: Array.from(r.sigma), votes: Array.from(r.votes) };
  },
  async computePair(name, index, iterations) {
    const m = site.manifest.models.find((x) => x.name === name);
    const set = await imageSet(m.images);
    const res = await computeFor(m, testImage(m, set, index), m.routing);
    const lengths = lengthsAt(res, iterations);
    const winners = order(lengths).slice(0, 2);
    const vectors = new Float32Array(2 * m.dim);
    winners.forEach((j, k) => vectors.set(vectorAt(res, iterations, j), k * m.dim));
    const rec = await decode(m, vectors, winners);
    return { lengths: Array.from(lengths), winners, reconstructions: Array.from(rec) };
  },
  state,
  timings: shown.timings,
  current: () => shown.current,
};
