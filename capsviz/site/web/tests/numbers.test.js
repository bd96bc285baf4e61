import assert from "node:assert/strict";
import { test } from "node:test";
import { argmax, columnParts, couplingsAt, interleave, lengthsAt, meanCouplings, order, pairs, percentDigits, placeMaps, range, uniformShare, vectorAt, viridis } from "../js/numbers.js";

// two recorded iterations of J = 2 class capsules of D = 2 numbers, I = 3 lower capsules
const res = {
  rule: "dynamic",
  I: 3,
  J: 2,
  D: 2,
  v: Float32Array.from([0.3, 0.4, 0, 0.1, /* iteration 2 */ 0.6, 0.8, 0, 0.2]),
  c: Float32Array.from([0.5, 0.5, 0.5, 0.5, 0.5, 0.5, /* iteration 2 */ 1, 0, 0.9, 0.1, 0, 1]),
};

test("lengths and vectors come from the iteration asked, one pass for self-attention", () => {
  assert.deepEqual(Array.from(lengthsAt(res, 1), (x) => +x.toFixed(6)), [0.5, 0.1]);
  assert.deepEqual(Array.from(lengthsAt(res, 2), (x) => +x.toFixed(6)), [1, 0.2]);
  assert.deepEqual(Array.from(vectorAt(res, 2, 1), (x) => +x.toFixed(6)), [0, 0.2]);
  const once = { ...res, rule: "self-attention" };
  assert.deepEqual(Array.from(lengthsAt(once, 7), (x) => +x.toFixed(6)), [0.5, 0.1]); // any count: its one pass
});

test("couplings of an iteration, their means and their evenness", () => {
  assert.deepEqual(Array.from(couplingsAt(res, 1), (x) => +x.toFixed(6)), [1, 0, 0.9, 0.1, 0, 1]);
  assert.equal(uniformShare(couplingsAt(res, 0), 3, 2), 1); // every vote split evenly
  assert.ok(uniformShare(Float32Array.from([1, 0, 0, 1, 1, 0]), 3, 2) < 1e-9); // every vote to one class
  assert.deepEqual(meanCouplings([1, 0, 0.5, 0.5], 2, 2), [0.75, 0.25]);
});

test("a CapsNet's place maps average the capsule types at each place", () => {
  // G = 1 place, K = 2 types, J = 2 classes: capsule (p, k) is row p * K + k
  assert.deepEqual(Array.from(placeMaps([1, 0, 0, 1], 1, 2, 2)[0]), [0.5]);
});

test("order, argmax, range, pairs and the digits of near-equal percentages", () => {
  assert.equal(argmax([0.1, 0.9, 0.9]), 1);
  assert.deepEqual(order([0.2, 0.9, 0.5]), [1, 2, 0]);
  assert.deepEqual(range([3, -1, 2]), [-1, 3]);
  assert.equal(pairs(["a", "b"], [0.5, 0.25]), "a 0.50, b 0.25");
  assert.equal(percentDigits([100, 99.99, 99.91]), 2); // told apart only with two digits
  assert.equal(percentDigits([50, 70]), 1);
});

test("interleave undoes the build's packing: even bytes first, then odd ones", () => {
  const raw = Uint8Array.from([1, 2, 3, 4, 5, 6]);
  const packed = Uint8Array.from([...raw.filter((_, k) => k % 2 === 0), ...raw.filter((_, k) => k % 2 === 1)]);
  assert.deepEqual(interleave(packed), raw);
});

test("viridis runs from dark purple to yellow and clamps", () => {
  assert.deepEqual(viridis(0), [68, 1, 84]);
  assert.deepEqual(viridis(1), [253, 231, 37]);
  assert.deepEqual(viridis(-5), viridis(0));
  assert.deepEqual(viridis(7), viridis(1));
});

test("a table's columns stacked in even parts of at most so many, every column once and in order", () => {
  assert.deepEqual(columnParts(6, 3), [[0, 1, 2], [3, 4, 5]]);
  assert.deepEqual(columnParts(7, 3), [[0, 1], [2, 3], [4, 5, 6]]);
  assert.deepEqual(columnParts(2, 3), [[0, 1]]);
  assert.deepEqual(columnParts(0, 3), [[]]);
});
