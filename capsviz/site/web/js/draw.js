// Drawing on the page: elements, pixels, heat maps with their scales, and charts with their text
// alternatives. Knows nothing of models; the views call it with numbers.
import { barChart, lineChart } from "./chart.js";
import { fmt, viridis } from "./numbers.js";

export const $ = (id) => document.getElementById(id);

export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

// a two-column table of [name, value] rows
export function table(node, rows) {
  node.replaceChildren(...rows.map(([k, v]) => el("tr", {}, el("th", { scope: "row" }, k), el("td", {}, v))));
}

// pixels (C, S, S) in [0, 1] onto a canvas of S x S (CSS scales it up)
export function paint(canvas, pixels, S, C = 1) {
  canvas.width = S;
  canvas.height = S;
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(S, S);
  for (let p = 0; p < S * S; p++) {
    for (let ch = 0; ch < 3; ch++) img.data[4 * p + ch] = Math.round(255 * pixels[(C === 3 ? ch * S * S : 0) + p]);
    img.data[4 * p + 3] = 255;
  }
  ctx.putImageData(img, 0, 0);
}

// two grey pictures (S, S) in [0, 1] as one: the first in red, the second in green, yellow where both draw
export function overlay(canvas, red, green, S) {
  canvas.width = S;
  canvas.height = S;
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(S, S);
  for (let p = 0; p < S * S; p++) img.data.set([Math.round(255 * red[p]), Math.round(255 * green[p]), 0, 255], 4 * p);
  ctx.putImageData(img, 0, 0);
}

// a (rows, cols) map coloured by viridis from lo (dark) to hi (yellow), nearest-neighbour
export function heat(canvas, values, rows, cols, hi, lo = 0) {
  canvas.width = cols;
  canvas.height = rows;
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(cols, rows);
  for (let p = 0; p < rows * cols; p++) {
    const [r, g, b] = viridis((values[p] - lo) / (hi - lo || 1));
    img.data.set([r, g, b, 255], 4 * p);
  }
  ctx.putImageData(img, 0, 0);
}

// the same map stretched over the input image, which shows through in white
export function heatOver(canvas, values, G, hi, lo, pixels, S) {
  const small = document.createElement("canvas");
  heat(small, values, G, G, hi, lo);
  const input = document.createElement("canvas");
  paint(input, pixels, S);
  canvas.width = S;
  canvas.height = S;
  const ctx = canvas.getContext("2d");
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(small, 0, 0, S, S);
  ctx.globalAlpha = 0.35;
  ctx.globalCompositeOperation = "lighter";
  ctx.drawImage(input, 0, 0);
}

// charts drawn at their box's width, and drawn again when it changes (a phone turned, a panel opened)
const charts = new WeakMap(); // node -> {make, spec, width}
const resizing =
  typeof ResizeObserver === "function"
    ? new ResizeObserver((entries) => {
        for (const e of entries) {
          const c = charts.get(e.target);
          if (c && Math.round(e.target.clientWidth) !== c.width) drawChart(e.target, c.make, c.spec);
        }
      })
    : null;

function drawChart(node, make, spec) {
  const width = Math.round(node.clientWidth) || 600; // a box not laid out yet: drawn again when it is
  node.innerHTML = make(spec, width);
  if (!charts.has(node) && resizing) resizing.observe(node);
  charts.set(node, { make, spec, width });
}

// a chart (js/chart.js) with its text alternative: `summary` says the numbers it shows; node.chart
// keeps what it draws (the browser tests compare a caption with its chart's numbers)
function plot(node, make, spec, summary) {
  node.chart = { height: 270, ...spec };
  drawChart(node, make, node.chart);
  node.setAttribute("role", "img");
  node.setAttribute("aria-label", summary);
}

export const bars = (node, spec, summary) => plot(node, barChart, spec, summary);
export const lines = (node, spec, summary) => plot(node, lineChart, spec, summary);

export function chart(parent) {
  return parent.appendChild(el("div", { class: "chart" }));
}

// a canvas named by what it shows and its numbers (a canvas is otherwise silent to a screen reader)
export function named(canvas, label) {
  canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", label);
  return canvas;
}

// the colours of heat() from lo to hi, with the two numbers at its ends
export function scale(lo, hi, digits = 2) {
  const ramp = el("span", { class: "ramp", "aria-hidden": "true" });
  return el("span", { class: "scale" }, `${fmt(lo, digits)} `, ramp, ` ${fmt(hi, digits)}`);
}

// a canvas of (rows, cols) cells with each row and column named beside it
export function labelled(box, canvas, rowNames, colNames, corner) {
  box.classList.add("labelled");
  const rows = el("div", { class: "rows", "aria-hidden": "true" }, ...rowNames.map((r) => el("span", {}, r)));
  const cols = el("div", { class: "cols", "aria-hidden": "true" }, ...colNames.map((c) => el("span", {}, c)));
  box.replaceChildren(el("span", { class: "corner", "aria-hidden": "true" }, corner), cols, rows, canvas);
  return box;
}
