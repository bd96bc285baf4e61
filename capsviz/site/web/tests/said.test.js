import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { fill } from "../js/words.js";
import {
  conv1Text,
  efficientLengthsText,
  efficientPredictionSaid,
  efficientPredictionsText,
  efficientPrimarySaid,
  efficientReconstructionText,
  efficientRoutingSaid,
  efficientTraced,
  emAnswerText,
  emInputText,
  emIterationSaid,
  emTraced,
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
        // the app's paragraph ends with the sentence about its planes, which the site's own images do not draw
        const figure = fill(S.messages.iter_figure, { D: tr.D });
        const shown = text.map((p) => (p.endsWith(figure) ? p.slice(0, -figure.length).trimEnd() : p));
        assert.ok(text.some((p) => p.endsWith(figure)), `${lang} ${n} iteration ${it + 1}: the app's planes sentence`);
        assert.deepEqual(got.text, shown, `${lang} ${n} iteration ${it + 1}`);
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

// The Efficient-CapsNet and EM tours on the same images (tests/test_site_js.py efficient_cases, em_cases):
// every sentence the page writes on the browser's numbers reads as the app's walk writes it
test("the Efficient-CapsNet and EM tours' sentences on the browser's numbers read as the app writes them", { skip: CASES ? false : "run through tests/test_site_js.py" }, () => {
  const { efficient, em } = JSON.parse(readFileSync(CASES, "utf8"));
  const f32 = (s, keys) => ({ ...s, ...Object.fromEntries(keys.map((k) => [k, Float32Array.from(s[k])])) });
  const eff = efficient.states.map((s) => efficientTraced(f32(s, ["u", "uHat", "c", "v"])));
  for (const { lang, said: S, want, shown } of efficient.cases) {
    efficient.states.forEach((s, n) => {
      const [tr, w, names] = [eff[n], want[n], efficient.names];
      const where = `${lang} ${n}`;
      assert.equal(efficientPrimarySaid(S, tr), w.primary[1], `${where} primary`);
      assert.deepEqual(efficientPredictionsText(S, tr), w.predictions[0], `${where} predictions`);
      assert.equal(efficientPredictionSaid(S, tr, names), w.predictions[1], `${where} predictions`);
      // the app's sentences on the learned prior b, which the browser has not, follow the page's
      const routed = efficientRoutingSaid(S, tr, names);
      assert.ok(w.routing[1].startsWith(routed + S.gap) && w.routing[1].length > routed.length + 20, `${where} routing: ${routed}`);
      assert.equal(marginSaid(S, tr.lengths, names, s.right), w.lengths[1], `${where} lengths`);
      const truth = s.right === null ? null : names[s.right];
      assert.deepEqual(efficientLengthsText(S, tr, names, truth), s.right === null ? w.lengths[0].slice(1) : w.lengths[0], `${where} lengths`);
      assert.deepEqual(efficientReconstructionText(S, tr, names, shown), w.reconstruction[0], `${where} reconstruction`);
    });
  }
  const ems = em.states.map((s) => emTraced(f32(s, ["aIn", "R", "a"])));
  for (const { lang, said: S, want } of em.cases) {
    em.states.forEach((s, n) => {
      assert.deepEqual(emInputText(S, em.model), want[n].input, `${lang} ${n} input`);
      want[n].iterations.forEach((measured, it) => assert.equal(emIterationSaid(S, ems[n], it, em.names), measured, `${lang} ${n} EM iteration ${it + 1}`));
      // the answer: with the label, the walk's paragraph opens with it (its spread-loss sentences, which quote lambda, follow);
      // a drawing's, the same message without the label
      const [answer] = emAnswerText(S, ems[n], em.names, s.right === null ? null : em.names[s.right]);
      const whole = want[n].activations;
      assert.ok(s.right === null ? answer === whole : whole.startsWith(answer + S.gap) && whole.length > answer.length + 20, `${lang} ${n} EM answer: ${answer}`);
    });
  }
});
