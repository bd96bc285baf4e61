// The page's state, declared in one place (as cnn-explainer keeps its store): what the student chose
// (`state`, which the address mirrors), what the site has opened (`site`), and what the page last
// computed and says (`shown`). Views read these and change `state`; nothing else holds the page's state.

export const state = {
  view: "explore", // one of the manifest's views
  lang: null, // the language shown (js/lang.js): the link's lang=, else the browser's; written into the link
  embed: false, // embed=1: only the view, for another page's iframe
  ask: true, // ask=0: the views without the app's questions before their answers (js/asking.js)
  image: 0, // the test image shown
  drawn: null, // Float32Array of a drawing, or null for a test image
  capsule: null, // the explorer's capsule (null: the longest)
  dims: new Float32Array(16), // the explorer's slider values
  iterations: 3, // routing iterations run
  t: 3, // the iteration shown
  step: 1, // the tour's step, from 1
  rule: null, // "dynamic": a model with its own routing routed by agreement instead; null: its own
  toy: { preset: null, J: 3, T: 3, cap: 1, rule: "dynamic", pts: null }, // the playground's
  em: { t: null }, // the EM view's iteration shown (null: the last)
  tourOf: null, // the EM model's name when the tour follows it (tour=em), else null: the open model
  why: { change: "shift", shift: 4, angle: 30 }, // the "Why capsules" view's change and its amounts (the app's defaults)
};

export const site = {
  manifest: null, // site.json
  model: null, // the open model's manifest entry
  sessions: new Map(), // graph file -> Promise of its onnxruntime session
  images: new Map(), // image set key -> Promise of its pixels
  used: new Set(), // every file downloaded: kept for offline use
};

export const shown = {
  current: null, // the latest computation (runtime.computeFor), for the views and the tests
  problem: "", // a model that could not be opened: said until another model opens
  notes: [], // what the link asked that is not shown as asked
  asked: [], // the same notes as {id, values}, said again when the language changes
  timings: { slider: [], iterations: [] }, // ms from a control's event to its view drawn (the benchmark reads them)
};

// the routing the open model is shown with: its own, or dynamic routing when the student asked
export function ruleOf(m) {
  return site.manifest.routings[m.routing].iterative ? m.routing : state.rule || m.routing;
}

// the iterations the shown result has: the slider's for an iterative routing, else the one pass
export function iterationsShown() {
  return site.manifest.routings[shown.current.rule].iterative ? state.iterations : 1;
}
