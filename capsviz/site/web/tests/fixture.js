// A manifest for the unit tests: the real words that `capsviz site` exports (capsviz/site/words.py),
// written to $CAPSVIZ_SITE_WORDS by tests/test_site_js.py, around two small made-up models.
import { readFileSync } from "node:fs";

export const WORDS = process.env.CAPSVIZ_SITE_WORDS;
export const NO_WORDS = WORDS ? false : "run through tests/test_site_js.py, which exports the manifest's words to $CAPSVIZ_SITE_WORDS";

export function manifest() {
  const words = JSON.parse(readFileSync(WORDS, "utf8"));
  const tour = [
    { key: "input", kind: "input", iteration: null, title: "The input", terms: [] },
    { key: "iteration1", kind: "iteration", iteration: 1, title: "Routing, iteration 1 of 2", terms: [] },
    { key: "iteration2", kind: "iteration", iteration: 2, title: "Routing, iteration 2 of 2", terms: [] },
  ];
  return {
    ...words,
    iterations_max: 10,
    models: [
      { name: "a.safetensors", routing: "dynamic", iterations: 2, classes: ["0", "1", "2"], dim: 4, tour },
      { name: "b.safetensors", routing: "self-attention", iterations: 1, classes: ["0", "1", "2"], dim: 4, tour: tour.slice(0, 1) },
    ],
    em_models: [{ name: "m.safetensors", routing: "em", iterations: 2, classes: ["0", "1", "2"], tour }],
    playground: { presets: { agree: [], outliers: [] }, lower: 6, limit: 3 },
  };
}
