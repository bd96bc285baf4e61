import assert from "node:assert/strict";
import { test } from "node:test";
import { distances, histogramRange, histograms, percentile, roundUp, totals } from "../js/em.js";

test("distances from each vote to its capsule's mean pose at each iteration", () => {
  // T = 2, I = 1, J = 2, H = 2
  const votes = [3, 4, 0, 1];
  const mu = [0, 0, 0, 0, /* t = 2 */ 3, 4, 0, 1];
  assert.deepEqual(Array.from(distances(votes, mu, 2, 1, 2, 2)), [5, 1, 0, 0]);
});

test("histograms sum R per bin, the last bin closed, farther votes left out", () => {
  // T = 1, I = 4, J = 1: distances 0, 0.5, 1 (the limit: last bin) and 2 (beyond)
  const h = histograms([0, 0.5, 1, 2], [0.1, 0.2, 0.3, 0.4], 1, 4, 1, 1, 2);
  assert.deepEqual(Array.from(h, (x) => +x.toFixed(6)), [0.1, 0.5]);
});

test("the range is numpy's percentile rounded up to two significant digits", () => {
  assert.equal(percentile([1, 2, 3, 4, 5], 50), 3);
  assert.equal(percentile([0, 10], 99), 9.9);
  assert.equal(roundUp(0.01234), 0.013);
  assert.equal(roundUp(123), 130);
  assert.equal(roundUp(0.05), 0.05); // exact: not raised to the next step
  const r = histogramRange(Array.from({ length: 100 }, (_, k) => k));
  assert.equal(r.limit, 99);
  assert.equal(r.share, 1);
});

test("totals: the R each capsule receives", () => {
  assert.deepEqual(Array.from(totals([0.5, 0.5, 1, 0], 1, 2, 2)), [1.5, 0.5]);
});
