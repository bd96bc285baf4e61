import assert from "node:assert/strict";
import { test } from "node:test";
import { readFileSync } from "node:fs";
import { barChart, escape, lineChart, textWidth, tickLabel, ticks, wrap } from "../js/chart.js";
import { fill, useMessages } from "../js/words.js";

const count = (svg, pattern) => (svg.match(pattern) || []).length;
const texts = (svg, cls) => [...svg.matchAll(new RegExp(`<text [^>]*class="${cls}"[^>]*>([^<]*)</text>`, "g"))].map((m) => m[1]);

test("ticks are round numbers covering the range", () => {
  assert.deepEqual(ticks(0, 1, 5), [0, 0.2, 0.4, 0.6, 0.8, 1]);
  assert.deepEqual(ticks(0, 100, 5), [0, 20, 40, 60, 80, 100]);
  assert.deepEqual(ticks(0, 1.1, 5), [0, 0.25, 0.5, 0.75, 1]);
  assert.deepEqual(ticks(3, 3), [3]); // an empty range: one tick, no endless loop
  assert.deepEqual([0.25, 0.5].map((v) => tickLabel(v, 0.25)), ["0.25", "0.50"]); // not 0.3 and 0.5
  assert.equal(tickLabel(40, 20), "40");
});

test("a title wraps at spaces, and between characters of Chinese or Japanese", () => {
  assert.deepEqual(wrap("one two three", textWidth("one two"), 12), ["one two", "three"]);
  const zh = wrap("每个胶囊的长度", textWidth("每个胶囊", 12), 12);
  assert.deepEqual(zh, ["每个胶囊", "的长度"]);
  assert.ok(textWidth("胶") > textWidth("a"));
});

test("a title keeps every space the translation has, and loses only the one a line breaks at", () => {
  for (const title of ["最も長い 2 つ：1（0.87）と 5（0.84）", "第 2 次 EM 迭代（共 3 次）后的激活概率 a_j", "Conv1 的 256 个特征图"]) {
    assert.deepEqual(wrap(title, 2000, 14), [title]);
    const narrow = wrap(title, textWidth("最も長い 2 つ", 14), 14);
    assert.ok(narrow.length > 1, title);
    assert.ok(narrow.every((line) => title.includes(line) && line === line.trim()), `${title}: ${narrow.join(" | ")}`);
    assert.equal(narrow.join("").replace(/ /g, ""), title.replace(/ /g, ""));
  }
  assert.deepEqual(wrap("  a  b ", 2000), ["a b"]); // runs of spaces read as one, as SVG shows them
});

// Every message of the site in each language as the app fills it (capsviz.i18n.t), written by
// tests/test_site_js.py: filled by the page and drawn as a chart's title, it reads the same
const FILLED = process.env.CAPSVIZ_SITE_FILLED;
test("every message drawn as a chart's title reads as the catalog's message filled by the app", { skip: FILLED ? false : "run through tests/test_site_js.py" }, () => {
  const cases = JSON.parse(readFileSync(FILLED, "utf8"));
  assert.ok(cases.length > 300 && new Set(cases.map((c) => c.lang)).size === 3);
  const unescape = (s) => s.replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&quot;/g, '"').replace(/&amp;/g, "&");
  for (const { lang, key, template, values, want } of cases) {
    useMessages({}, lang);
    const title = fill(template, values);
    assert.equal(title, want, `${lang} ${key}: filled`);
    const oneLine = want.replace(/\s+/g, " ").trim();
    for (const width of [390, 1280]) {
      const svg = barChart({ title, xTitle: "x", yTitle: "y", height: 270, labels: ["a"], values: [1] }, width);
      const lines = texts(svg, "chart-title").map(unescape);
      let at = 0; // the lines, one after another, are the title with at most a space dropped at each break
      for (const line of lines) {
        assert.ok(oneLine.startsWith(line, at), `${lang} ${key} at ${width}: ${lines.join(" | ")}`);
        at += line.length + (oneLine[at + line.length] === " " ? 1 : 0);
      }
      assert.equal(at, oneLine.length, `${lang} ${key} at ${width}`);
      if (lines.length === 1) assert.equal(lines[0], oneLine, `${lang} ${key} at ${width}`);
    }
  }
  useMessages({});
});

test("a bar chart has its title, both axis titles, a bar, a label and a tooltip per class", () => {
  const svg = barChart(
    {
      title: "The longest: 7 (0.95)",
      xTitle: "class capsule",
      yTitle: "length |v_j|",
      height: 270,
      labels: ["0", "1", "7"],
      values: [0.1, 0.2, 0.95],
      colours: ["#9aa5b1", "#9aa5b1", "#0072B2"],
      text: ["0.10", "0.20", "0.95"],
      hover: ["0: 0.100", "1: 0.200", "7: 0.950"],
      yRange: [0, 1.1],
    },
    500,
  );
  assert.deepEqual(texts(svg, "chart-title"), ["The longest: 7 (0.95)"]);
  assert.deepEqual(texts(svg, "x-title"), ["class capsule"]);
  assert.deepEqual(texts(svg, "y-title"), ["length |v_j|"]);
  assert.equal(count(svg, /<rect /g), 3);
  assert.equal(count(svg, /<title>/g), 3);
  assert.ok(svg.includes(">0.95</text>") && svg.includes('fill="#0072B2"'));
  assert.ok(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg" width="500" height="270"'));
});

test("a taller bar stands higher; a histogram's bins sit at their numeric places", () => {
  const svg = barChart({ title: "h", xTitle: "d", yTitle: "R", height: 210, xRange: [0, 2], at: [0.5, 1.5], binWidth: 1, values: [1, 3] }, 300);
  const bars = [...svg.matchAll(/<rect x="([0-9.]+)" y="([0-9.]+)" width="([0-9.]+)" height="([0-9.]+)"/g)].map((m) => m.slice(1).map(Number));
  assert.equal(bars.length, 2);
  assert.ok(bars[1][3] > 2.9 * bars[0][3] && bars[1][3] < 3.1 * bars[0][3]); // heights in proportion
  assert.ok(Math.abs(bars[0][0] + bars[0][2] - bars[1][0]) < 0.2); // adjacent bins touch
});

test("a line chart draws a line and a point per value, a legend entry per series and the iteration shown", () => {
  const svg = lineChart(
    { title: "|v_j| after each iteration", xTitle: "iteration", yTitle: "length", height: 270, x: [1, 2, 3], series: [{ name: "a", values: [0.1, 0.5, 0.9] }, { name: "b", values: [0.2, 0.2, 0.1] }], yRange: [0, 1], marker: 2 },
    400,
  );
  assert.equal(count(svg, /<polyline /g), 2);
  assert.equal(count(svg, /<circle /g), 6);
  assert.deepEqual(texts(svg, "legend"), ["a", "b"]);
  assert.equal(count(svg, /stroke-dasharray/g), 1);
  assert.ok(svg.includes("<title>a, iteration 3: 0.900</title>"));
});

test("a narrow line chart puts its legend on more rows and grows to hold them", () => {
  const series = Array.from({ length: 10 }, (_, j) => ({ name: `class ${j}`, values: [0.5, 0.6] }));
  const wide = lineChart({ title: "t", xTitle: "x", yTitle: "y", height: 270, x: [1, 2], series }, 1200);
  const narrow = lineChart({ title: "t", xTitle: "x", yTitle: "y", height: 270, x: [1, 2], series }, 300);
  const height = (svg) => Number(svg.match(/height="([0-9.]+)"/)[1]);
  assert.ok(height(narrow) > height(wide));
});

test("a bar chart draws a dotted level for each of its lines, named", () => {
  const svg = barChart({ title: "t", xTitle: "x", yTitle: "y", height: 270, labels: ["a", "b"], values: [0.95, 0.05], lines: [{ name: "0.9", value: 0.9 }, { name: "0.1", value: 0.1 }], yRange: [0, 1] }, 300);
  assert.deepEqual(texts(svg, "level"), ["0.9", "0.1"]);
  assert.equal(count(svg, /stroke-dasharray="4 3"/g), 2);
});

test("a bar's error bar spans value - e to value + e on the y scale, and its label sits above it", () => {
  const svg = barChart({ title: "t", xTitle: "x", yTitle: "y", height: 270, labels: ["a", "b"], values: [4, 10], errors: [2, 0], text: ["4", "10"], yRange: [0, 20] }, 300);
  const whiskers = [...svg.matchAll(/<path class="error-bar" d="M([0-9.]+),([0-9.]+)V([0-9.]+)/g)].map((m) => m.slice(1).map(Number));
  assert.equal(whiskers.length, 1); // none where e is 0
  const [, lo, hi] = whiskers[0];
  const bar = [...svg.matchAll(/<rect x="[0-9.]+" y="([0-9.]+)" width="[0-9.]+" height="([0-9.]+)"/g)].map((m) => m.slice(1).map(Number))[0];
  const perUnit = bar[1] / 4; // px per unit: the bar's height over its value
  assert.ok(Math.abs(lo - hi - 4 * perUnit) < 0.3); // 2 below to 2 above: 4 units
  assert.ok(Math.abs(bar[0] - (lo + hi) / 2) < 0.3); // centred on the bar's top
  const label = Number(svg.match(/<text x="[0-9.]+" y="([0-9.]+)" class="bar-text"[^>]*>4</)[1]);
  assert.ok(label < hi);
});

test("a few bars whose names do not fit side by side name every bar, on two alternating rows", () => {
  const spec = { title: "t", xTitle: "routing", yTitle: "y", height: 270, labels: ["dynamic", "uniform", "random", "self-attention"], values: [1, 2, 3, 4] };
  const rows = (svg) => [...svg.matchAll(/<text x="[0-9.]+" y="([0-9.]+)" class="x-label"[^>]*>([^<]*)</g)].map((m) => [m[2], Number(m[1])]);
  const narrow = rows(barChart(spec, 340));
  assert.deepEqual(narrow.map(([name]) => name), spec.labels);
  assert.equal(new Set(narrow.map(([, y]) => y)).size, 2);
  assert.ok(narrow[0][1] === narrow[2][1] && narrow[1][1] === narrow[3][1] && narrow[1][1] > narrow[0][1]);
  const wide = rows(barChart(spec, 900));
  assert.deepEqual(wide.map(([name]) => name), spec.labels);
  assert.equal(new Set(wide.map(([, y]) => y)).size, 1);
  const [xTitle] = texts(barChart(spec, 340), "x-title");
  assert.equal(xTitle, "routing");
  const titleY = Number(barChart(spec, 340).match(/<text x="[0-9.]+" y="([0-9.]+)" class="x-title"/)[1]);
  assert.ok(titleY > narrow[1][1] + 10); // the axis title below both rows
});

test("grouped bars: a bar per group at each label, negative ones below zero, and a legend", () => {
  const svg = barChart(
    { title: "t", xTitle: "dimension", yTitle: "value", height: 270, labels: ["d0", "d1", "d2"], groups: [{ name: "unchanged", values: [0.1, -0.2, 0.3], colour: "#999999" }, { name: "changed", values: [0.2, -0.1, 0.3], colour: "#0072B2" }] },
    400,
  );
  assert.equal(count(svg, /<rect x=/g), 6 + 2); // 6 bars, 2 legend swatches
  assert.deepEqual(texts(svg, "legend"), ["unchanged", "changed"]);
  assert.ok(svg.includes("<title>d1, unchanged: -0.200</title>"));
});

test("text from words is escaped", () => {
  assert.equal(escape(`<b>"x" & y</b>`), "&lt;b&gt;&quot;x&quot; &amp; y&lt;/b&gt;");
  const svg = barChart({ title: "a < b", xTitle: "x", yTitle: "y", height: 200, labels: ["<i>"], values: [0.5] }, 200);
  assert.ok(!svg.includes("<i>") && svg.includes("&lt;i&gt;"));
});
