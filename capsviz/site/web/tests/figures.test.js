import assert from "node:assert/strict";
import { test } from "node:test";
import { textWidth } from "../js/chart.js";
import { arrowsSvg, inline, planeLimit, planesSvg } from "../js/figures.js";

const count = (svg, pattern) => (svg.match(pattern) || []).length;

test("an arrow for each place, a dot where the capsule is too short to draw", () => {
  const lengths = [
    [0.9, 0.01],
    [0.5, 0.7],
  ];
  const directions = [
    [
      [1, 0],
      [0, 1],
    ],
    [
      [0, -1],
      [0.6, 0.8],
    ],
  ];
  const svg = arrowsSvg(lengths, directions, 200);
  assert.equal(count(svg, /<polyline /g), 3); // three arrowheads
  assert.equal(count(svg, /<circle /g), 1); // 0.01 of a half-cell: a dot
  assert.ok(svg.includes("<title>0.900</title>"));
});

test("an arrow points the way its direction says, up being positive", () => {
  const svg = arrowsSvg([[1]], [[[0, 1]]], 100);
  const [x1, y1, x2, y2] = svg.match(/<line x1="([0-9.]+)" y1="([0-9.]+)" x2="([0-9.]+)" y2="([0-9.]+)"/).slice(1).map(Number);
  assert.ok(Math.abs(x1 - x2) < 0.1 && y2 < y1); // straight up on screen
});

const routing = {
  points: [
    [
      [1, 0],
      [0.5, 0.5],
    ],
    [
      [-1, 0],
      [0, 2],
    ],
  ],
  weights: [
    [0.9, 0.1],
    [0.05, 0.02],
  ],
  s: [
    [1.2, 0.1],
    [0.1, 0.1],
  ],
  v: [
    [0.6, 0.05],
    [0.01, 0.01],
  ],
  shown: ["1: a", "2: b"],
};

test("the planes hold every prediction and output, with room around them", () => {
  assert.ok(Math.abs(planeLimit(routing) - 2.3) < 1e-9); // 1.15 times the farthest, the prediction at (0, 2)
  const em = { points: [[[1, 1]]], weights: [[1]], mu: [[0.5, 0.5]], sigma: [[1, 0.2]], fit: true, shown: ["1: a"] };
  assert.ok(Math.abs(planeLimit(em) - 1.15 * 2.5) < 1e-9); // a mean and two spreads
});

test("a routing plane per class: an arrow per prediction, its opacity its coupling, s dashed and v", () => {
  const svg = planesSvg(routing, [["capsule 7", "|s| = 1.21"], ["capsule 1", "|s| = 0.14"]], 600);
  assert.equal(count(svg, /<polyline /g), 2 * 2 + 2 * 2); // 4 predictions, s and v in each of 2 panels
  assert.equal(count(svg, /stroke-dasharray="5 3"/g), 4); // s's line and head, twice
  assert.ok(svg.includes('stroke-opacity="0.915"')); // 0.15 + 0.85 * 0.9
  assert.ok(svg.includes(">capsule 7<") && svg.includes(">|s| = 0.14<"));
});

test("an EM plane: a dot per vote, the mean's cross and two spreads' ellipses; the votes alone before routing", () => {
  const em = { points: [[[1, 1]], [[0, 1]]], weights: [[0.5], [0.5]], mu: [[0.5, 0.5], [0, 0]], sigma: [[0.3, 0.2], [0.4, 0.4]], a: [0.6, 0.4], fit: true, shown: ["1: a"] };
  const fitted = planesSvg(em, [["7", "a"], ["1", "b"]], 600);
  assert.equal(count(fitted, /<ellipse /g), 4);
  assert.equal(count(fitted, /<path /g), 2);
  const before = planesSvg({ ...em, fit: false }, [["7", ""], ["1", ""]], 600);
  assert.equal(count(before, /<ellipse /g), 0);
  assert.equal(count(before, /<circle /g), 2);
});

test("the line under a plane wraps to the plane's width on a phone, and keeps its words", () => {
  const em = { points: [[[1, 1]], [[0, 1]]], weights: [[0.5], [0.5]], mu: [[0.5, 0.5], [0, 0]], sigma: [[0.3, 0.2], [0.4, 0.4]], a: [0.6, 0.4], fit: true, shown: ["1: a"] };
  const said = ["activation a = 0.55, spread sigma = (0.75, 0.62)", "激活概率 a = 0.45，方差 sigma = (1.08, 1.17)"];
  for (const width of [340, 640]) {
    const svg = planesSvg(em, [["7", said[0]], ["1", said[1]]], width);
    const panel = Math.max(140, Math.min(300, (width - 24) / 2));
    const lines = [...svg.matchAll(/<text x="([0-9.]+)" y="([0-9.]+)" class="under"[^>]*>([^<]*)<\/text>/g)].map((m) => [Number(m[1]), m[3]]);
    for (const [, line] of lines) assert.ok(textWidth(line) <= panel - 4 || !line.includes(" "), `${width}: ${line}`);
    const first = lines.filter(([x]) => x < 8 + panel + 4).map(([, l]) => l);
    assert.equal(first.join(" "), said[0]);
    const height = Number(svg.match(/height="([0-9.]+)"/)[1]);
    const lastY = Math.max(...[...svg.matchAll(/class="under"/g)].map((m) => Number(svg.slice(0, m.index).match(/y="([0-9.]+)" $/)[1])));
    assert.ok(lastY + 4 <= height, `${width}: the last line at ${lastY} inside ${height}`);
    if (width === 340) assert.ok(first.length > 1);
  }
});

test("the tour's Markdown: bold and italic, everything else escaped", () => {
  assert.equal(inline("**M-step**: a *whether* <b> & c"), "<strong>M-step</strong>: a <em>whether</em> &lt;b&gt; &amp; c");
});

test("each plane gives its scale: the half-width at the four ends of its axes", () => {
  const svg = planesSvg(routing, [["capsule 7", ""], ["capsule 1", ""]], 600);
  const ticks = [...svg.matchAll(/class="tick"[^>]*>([^<]*)</g)].map((m) => m[1]);
  assert.deepEqual(ticks, Array(2).fill(["−2.30", "2.30", "2.30", "−2.30"]).flat()); // planeLimit(routing) = 2.3
});
