import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { angle, answers, oneImage, oneImageNumbers, relative } from "../js/why.js";
import { fill } from "../js/words.js";

const CASES = process.env.CAPSVIZ_SITE_WHY;

test("angles and relative changes as torch computes them", () => {
  assert.equal(angle([1, 0], [1, 0]), 0);
  assert.ok(Math.abs(angle([1, 0], [0, 2]) - 90) < 1e-9);
  assert.ok(Math.abs(angle([1, 1], [-1, -1]) - 180) < 1e-5);
  assert.equal(angle([0, 0], [1, 0]), 90); // a zero vector: cosine 0, as torch's eps gives
  assert.ok(Math.abs(relative([3, 4], [3, 8]) - 0.8) < 1e-12);
});

test("one digit under a change: the winner is the longest unchanged capsule, the CNN's answer its unchanged one", () => {
  const capsules = [
    [
      [0.1, 0],
      [0.6, 0.8],
    ],
    [
      [0.9, 0],
      [0, 0.5],
    ],
  ];
  const view = oneImage([0, 4], capsules, [[0.2, 0.8], [0.7, 0.3]], [[3, 4], [3, 8]]);
  assert.equal(view.capsule, 1); // longest at 0, though capsule 0 is longer at 4
  assert.deepEqual(view.lengths, [1, 0.5]);
  assert.ok(Math.abs(view.angles[1] - (Math.acos(0.8) * 180) / Math.PI) < 1e-9);
  assert.equal(view.cnn_answer, 1);
  assert.deepEqual(view.cnn_score, [0.8, 0.3]);
  assert.ok(Math.abs(view.cnn_features[1] - 80) < 1e-9);
  const said = oneImageNumbers(view, ["a", "b"], 4, 0.05);
  assert.equal(said.moves, 2);
  assert.equal(said.name, "b");
  assert.deepEqual(answers(capsules, [[0.2, 0.8], [0.7, 0.3]]), [
    { cnn: 1, score: 0.8, caps: 1, length: 1 },
    { cnn: 0, score: 0.7, caps: 0, length: 0.9 },
  ]);
});

// The app's sentence (capsviz.analysis.why.one_image_words) for the same numbers, in each language,
// written by tests/test_site_js.py: the page's message filled by the page reads the same
test("the chapter's sentence reads as the app writes it, in each language", { skip: CASES ? false : "run through tests/test_site_js.py" }, () => {
  for (const c of JSON.parse(readFileSync(CASES, "utf8"))) {
    const said = fill(c.message, oneImageNumbers(c.view, c.names, c.amount, c.step));
    assert.equal(said, c.want, c.lang);
    assert.equal(fill(c.cnn_message, { name: "7", score: 0.98765 }), c.cnn_want, c.lang);
  }
});
