import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { splitOf, toyId, toyQuestion } from "../js/toyask.js";
import { useMessages } from "../js/words.js";

// tests/test_site_js.py writes the app's playground questions (capsviz.analysis.questions.routed_split)
// on toy states, both sides of every threshold of the near-uniform rule, in each language
const CASES = process.env.CAPSVIZ_SITE_PLAYGROUND;
const NO_CASES = CASES ? false : "run through tests/test_site_js.py, which writes the app's questions to $CAPSVIZ_SITE_PLAYGROUND";

test("the page's playground question is the app's, in every language, on both sides of each threshold", { skip: NO_CASES }, () => {
  const cases = JSON.parse(readFileSync(CASES, "utf8"));
  assert.deepEqual(
    cases.map((c) => c.lang),
    ["en", "zh-Hans", "ja"],
  );
  for (const { lang, messages, counted, rules, states } of cases) {
    useMessages(messages, lang, counted);
    for (const { c, k, T, attention, want } of states) {
      const q = toyQuestion({ qid: "q", c, T, k, attention }, rules);
      const where = `${lang} c=${c} k=${k} T=${T}`;
      assert.equal(q.answer, want.answer, where);
      assert.equal(q.text, want.text, where);
      assert.equal(q.why, want.why, where);
      // the same choices with the same words (the app shuffles their order by its id; the page keeps each upper capsule's order)
      const choices = (x) => Object.fromEntries(x.keys.map((key, i) => [key, x.labels[i]]));
      assert.deepEqual(choices(q), choices(want), where);
      assert.deepEqual(q.verdicts, want.verdicts, where);
    }
  }
  useMessages({});
});

test("the split follows the exported rule: a changed threshold changes the answer", { skip: NO_CASES }, () => {
  const { rules } = JSON.parse(readFileSync(CASES, "utf8"))[0];
  assert.equal(splitOf([0.62, 0.38], rules), "uniform"); // evenness 95.8%, more than 95%
  const stricter = structuredClone(rules);
  stricter["near uniform"].cases[0].when[0].right = 0.97; // the first case: evenness at most this is away from uniform
  assert.equal(splitOf([0.62, 0.38], stricter), "1");
});

test("a question's id is fixed by what it is about and differs when the points differ", () => {
  assert.equal(toyId(["a", [1, 2]]), toyId(["a", [1, 2]]));
  assert.notEqual(toyId(["a", [1, 2]]), toyId(["a", [1, 2.1]]));
  assert.match(toyId([]), /^split:[0-9a-f]{16}$/);
});
