// Drawing on the page: elements, pixels, heat maps with their scales, and charts with their text
// alternatives. Knows nothing of models; the views call it with numbers.
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

const PLOT = { displayModeBar: false, responsive: true };
// plotly.js 3 and later read an axis title only as {text}: a plain string is ignored
export function layout(title, x, y, extra = {}) {
  const { xaxis, yaxis, ...rest } = extra;
  return {
    font: { family: typeof document === "undefined" ? undefined : getComputedStyle(document.documentElement).fontFamily }, // the page's, with its CJK faces
    title: { text: title, font: { size: 14 } },
    margin: { l: 56, r: 12, t: 36, b: 48 },
    height: 270,
    paper_bgcolor: "rgba(0,0,0,0)",
    plot_bgcolor: "rgba(0,0,0,0)",
    xaxis: { type: "category", title: { text: x }, ...xaxis }, // category: every class named under its bar
    yaxis: { title: { text: y }, ...yaxis },
    ...rest,
  };
}

// a chart with its text alternative: `summary` says the numbers it shows
export function plot(node, traces, lay, summary) {
  Plotly.react(node, traces, lay, PLOT);
  node.setAttribute("role", "img");
  node.setAttribute("aria-label", summary);
}

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
