import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import {
  conv1Text,
  inputText,
  iterationSaid,
  lengthsText,
  marginSaid,
  predictionSaid,
  predictionsText,
  primarySaid,
  primaryText,
  pyFixed,
  reconstructionText,
  traced,
} from "../js/said.js";

const CASES = process.env.CAPSVIZ_SITE_TOUR;

test("numbers written as Python's format writes them: a tie to the even digit", () => {
  assert.equal(pyFixed(0.125, 2), "0.12");
  assert.equal(pyFixed(0.375, 2), "0.38");
  assert.equal(pyFixed(12.5, 0), "12");
  assert.equal(pyFixed(0.1234, 2), "0.12");
  assert.equal(pyFixed(2.675, 2), "2.67"); // 2.675 is a little under, in binary
});

// The app's walk (capsviz.families.capsnet.tour) on real traces of a shipped CapsNet, in each language,
// written by tests/test_site_js.py with the state the browser computes: the page's sentences read the same
test("the tour's sentences on the browser's numbers read as the app writes them, in each language", { skip: CASES ? false : "run through tests/test_site_js.py" }, () => {
  const { model, names, grid, types, states, cases } = JSON.parse(readFileSync(CASES, "utf8"));
  const traces = states.map((s) => traced({ ...s, u: Float32Array.from(s.u), uHat: Float32Array.from(s.uHat), c: Float32Array.from(s.c), v: Float32Array.from(s.v) }, s.T));
  for (const { lang, said: S, want, words } of cases) {
    states.forEach((s, n) => {
      const tr = traces[n];
      const w = want[n];
      const p = primarySaid(S, tr, grid, types, words.shown);
      assert.deepEqual([p.measured, p.warn], w.primary, `${lang} ${n} primary`);
      assert.equal(predictionSaid(S, tr, names, grid, types, words.thing), w.predictions, `${lang} ${n} predictions`);
      w.iterations.forEach(([text, measured], it) => {
        const got = iterationSaid(S, tr, it, names, words.capsule);
        assert.deepEqual(got.text, text, `${lang} ${n} iteration ${it + 1}`);
        assert.equal(got.measured, measured, `${lang} ${n} iteration ${it + 1}`);
      });
      assert.equal(marginSaid(S, tr.lengths, names, s.right), w.lengths, `${lang} ${n} lengths`);
      const t = w.text;
      assert.deepEqual(inputText(S, model, s.T, words.capsule), t.input, `${lang} ${n} input`);
      assert.deepEqual(conv1Text(S, words.digits, s.channels), t.conv1, `${lang} ${n} conv1`);
      assert.deepEqual(primaryText(S, tr, grid, types), t.primary, `${lang} ${n} primary`);
      assert.deepEqual(predictionsText(S, tr, names, words.digits, words.capsule, words.thing), t.predictions, `${lang} ${n} predictions`);
      // a drawing has no label: the answer's sentence, which quotes it, is left out (the walk was given none)
      const truth = s.right === null ? null : names[s.right];
      assert.deepEqual(lengthsText(S, tr, names, words.capsule, truth), s.right === null ? t.lengths.slice(1) : t.lengths, `${lang} ${n} lengths`);
      assert.deepEqual(reconstructionText(S, tr, names, words.digits, words.shown), t.reconstruction, `${lang} ${n} reconstruction`);
    });
  }
});
