// The site's charts as SVG markup: bars (a class per bar, or a histogram's bins) and lines (a
// series per class over the iterations), each with its title, both axis titles, tick labels and,
// for lines, a legend. Pure: numbers and words in, a string out (tests/chart.test.js runs it in
// node); draw.js puts it in the page. The text takes the page's font, so Chinese and Japanese
// show in their own faces. A chart draws in a few milliseconds, so a control that changes it
// redraws it whole.

// plotly's default colours, one per series (the site's charts always drew in them)
export const COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
const INK = "#1b1f24";
const MUTED = "#5a6570";
const GRID = "#e3e7eb";
const FONT = 12; // tick labels and legend, px

export function escape(text) {
  return String(text).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]);
}

// the width of `text` in px at `size`, estimated: a Chinese or Japanese character is a full em, others about 0.6
export function textWidth(text, size = FONT) {
  let w = 0;
  for (const ch of String(text)) w += ch.codePointAt(0) >= 0x2e80 ? 1 : 0.6;
  return w * size;
}

// `text` in lines no wider than `width` px: broken at spaces, and between any two characters of Chinese or
// Japanese (never before a closing bracket or a mark of punctuation); every space the text has stays where
// it is, except the one a line breaks at
const CLOSING = /^[）」』】〉》、。，．：；！？]$/u;
export function wrap(text, width, size = FONT) {
  const pieces = [...String(text).matchAll(/(\s*)([\u2e80-\uffff]|[^\s\u2e80-\uffff]+)/gu)].map((m) => ({ space: m[1] ? " " : "", word: m[2] }));
  const lines = [];
  let line = "";
  for (const { space, word } of pieces) {
    const next = line ? line + space + word : word;
    if (line && !CLOSING.test(word) && textWidth(next, size) > width) {
      lines.push(line);
      line = word;
    } else {
      line = next;
    }
  }
  if (line) lines.push(line);
  return lines.length ? lines : [""];
}

// about `count` round ticks from lo to hi (steps of 1, 2, 2.5 or 5 times a power of ten)
export function ticks(lo, hi, count = 5) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = power * ([1, 2, 2.5, 5, 10].find((m) => m * power >= raw) || 10);
  const out = [];
  for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toFixed(12));
  return out;
}

// a tick's label: as many decimals as the step between ticks has (0.25: two)
export function tickLabel(v, step) {
  let digits = 0;
  while (digits < 6 && Math.abs(step * 10 ** digits - Math.round(step * 10 ** digits)) > 1e-6) digits += 1;
  return v.toFixed(digits);
}

function text(x, y, content, attrs = "") {
  return `<text x="${x.toFixed(1)}" y="${y.toFixed(1)}" ${attrs}>${escape(content)}</text>`;
}

// the frame every chart shares: title, plot area, y axis with its ticks, grid and title, x axis title; -> {svg parts, area, y scale}
function frame(spec, width, below) {
  const titleSize = spec.titleSize || 14;
  const titleLines = wrap(spec.title, width - 16, titleSize);
  const yRange = spec.yRange || [0, Math.max(...spec.top) * 1.1 || 1];
  const yTicks = ticks(yRange[0], yRange[1], 5).filter((v) => v >= yRange[0] - 1e-9 && v <= yRange[1] + 1e-9);
  const yStep = yTicks.length > 1 ? yTicks[1] - yTicks[0] : 1;
  const yLabels = yTicks.map((v) => tickLabel(v, yStep));
  const left = 26 + Math.max(...yLabels.map((l) => textWidth(l))) + 6;
  const top = 12 + titleLines.length * (titleSize + 4); // the title clear of the top grid line
  const xTitleLines = wrap(spec.xTitle, width - left - 12);
  const extra = ((spec.tickRows || 1) - 1) * (FONT + 3); // a second row of tick labels, where they alternate
  const bottom = 22 + extra + xTitleLines.length * (FONT + 3) + below;
  const area = { left, top, right: width - 12, bottom: spec.height - bottom };
  area.width = area.right - area.left;
  area.height = area.bottom - area.top;
  const y = (v) => area.bottom - ((Math.min(Math.max(v, yRange[0]), yRange[1]) - yRange[0]) / (yRange[1] - yRange[0] || 1)) * area.height;
  const parts = [];
  titleLines.forEach((line, k) => parts.push(text(width / 2, 6 + (k + 1) * (titleSize + 2), line, `class="chart-title" text-anchor="middle" font-size="${titleSize}" fill="${INK}"`)));
  yTicks.forEach((v, k) => {
    parts.push(`<line x1="${area.left}" x2="${area.right}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}" stroke="${GRID}"/>`);
    parts.push(text(area.left - 5, y(v) + 4, yLabels[k], `text-anchor="end" font-size="${FONT}" fill="${MUTED}"`));
  });
  const yMid = (area.top + area.bottom) / 2;
  parts.push(text(13, yMid, spec.yTitle, `class="y-title" text-anchor="middle" font-size="${FONT}" fill="${INK}" transform="rotate(-90 13 ${yMid.toFixed(1)})"`));
  xTitleLines.forEach((line, k) =>
    parts.push(text((area.left + area.right) / 2, area.bottom + 20 + extra + (k + 1) * (FONT + 3), line, `class="x-title" text-anchor="middle" font-size="${FONT}" fill="${INK}"`)),
  );
  parts.push(`<line x1="${area.left}" x2="${area.right}" y1="${area.bottom}" y2="${area.bottom}" stroke="${MUTED}"/>`);
  return { parts, area, y, xTitleBottom: area.bottom + 20 + extra + xTitleLines.length * (FONT + 3) };
}

// the x positions of n categories, and their labels on `rows` alternating rows, thinned to every k-th where
// all would not fit
function categories(area, labels, rows = 1) {
  const band = area.width / labels.length;
  const widest = Math.max(...labels.map((l) => textWidth(l)));
  const every = Math.max(1, Math.ceil((widest + 4) / (band * rows)));
  return { band, at: (k) => area.left + (k + 0.5) * band, shown: (k) => k % every === 0, row: (k) => Math.floor(k / every) % rows };
}

// 2 where a few named bars' labels fit side by side only on two alternating rows (each then has two bars'
// width), else 1; `width` less an estimate of the y axis's margin is the plot's
function labelRows(labels, width) {
  const band = (width - 80) / labels.length;
  const widest = Math.max(...labels.map((l) => textWidth(l)));
  return widest + 4 > band && widest + 4 <= 2 * band ? 2 : 1;
}

// a legend of named colours in rows that fit `width`: {rows (lists of indices), widths, height}
function legendRows(names, width) {
  const widths = names.map((n) => 34 + textWidth(n));
  const rows = [];
  let row = [];
  let used = 0;
  widths.forEach((w, k) => {
    if (row.length && used + w > width - 24) {
      rows.push(row);
      row = [];
      used = 0;
    }
    row.push(k);
    used += w;
  });
  if (row.length) rows.push(row);
  return { rows, widths, height: rows.length * (FONT + 8) };
}

function drawLegend(parts, legend, names, colours, width, top, swatch) {
  legend.rows.forEach((r, k) => {
    const rowWidth = r.reduce((w, j) => w + legend.widths[j], 0);
    let at = (width - rowWidth) / 2;
    const ly = top + 6 + k * (FONT + 8) + FONT / 2;
    for (const j of r) {
      parts.push(swatch(at, ly, colours[j]));
      parts.push(text(at + 22, ly + 4, names[j], `class="legend" font-size="${FONT}" fill="${INK}"`));
      at += legend.widths[j];
    }
  });
}

function svg(width, height, parts) {
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" aria-hidden="true">${parts.join("")}</svg>`;
}

// A bar chart. spec: {title, xTitle, yTitle, height, yRange?, titleSize?, labels (one per bar), values,
// colours? (one per bar), colour?, text? (a label per bar: above it, or inside its top with `inside`),
// hover? (a tooltip per bar), errors? (a half-width per bar: an error bar from value - e to value + e),
// lines? ([{name, value}]: dotted levels named at the right, e.g. a loss's targets)}; or, for a histogram, numeric x: {xRange: [lo, hi], at (bin centres), binWidth}; or, for
// several bars a label side by side, groups: [{name, values, colour}] in place of values (a legend names them)
export function barChart(spec, width) {
  if (spec.groups) return groupedBars(spec, width);
  const numeric = Boolean(spec.xRange);
  const rows = numeric ? 1 : labelRows(spec.labels, width);
  const { parts, area, y } = frame({ ...spec, top: spec.values, tickRows: rows }, width, 0);
  const n = spec.values.length;
  const x = numeric ? (v) => area.left + ((v - spec.xRange[0]) / (spec.xRange[1] - spec.xRange[0])) * area.width : null;
  const cat = numeric ? null : categories(area, spec.labels, rows);
  const barWidth = numeric ? (spec.binWidth / (spec.xRange[1] - spec.xRange[0])) * area.width : cat.band * 0.8;
  for (let k = 0; k < n; k++) {
    const centre = numeric ? x(spec.at[k]) : cat.at(k);
    const top = y(Math.max(spec.values[k], 0));
    const base = y(0);
    const colour = (spec.colours && spec.colours[k]) || spec.colour || "#0072B2";
    const tip = spec.hover ? `<title>${escape(spec.hover[k])}</title>` : "";
    parts.push(`<rect x="${(centre - barWidth / 2).toFixed(1)}" y="${top.toFixed(1)}" width="${Math.max(barWidth, 0.5).toFixed(1)}" height="${Math.max(base - top, 0).toFixed(1)}" fill="${colour}">${tip}</rect>`);
    const error = spec.errors ? spec.errors[k] : 0;
    if (error > 0) {
      const [hi, lo, cap] = [y(spec.values[k] + error), y(Math.max(spec.values[k] - error, 0)), Math.min(6, barWidth / 4)];
      parts.push(`<path class="error-bar" d="M${centre.toFixed(1)},${lo.toFixed(1)}V${hi.toFixed(1)}M${(centre - cap).toFixed(1)},${hi.toFixed(1)}h${(2 * cap).toFixed(1)}M${(centre - cap).toFixed(1)},${lo.toFixed(1)}h${(2 * cap).toFixed(1)}" stroke="${INK}" stroke-width="1.2" fill="none"/>`);
    }
    if (spec.text) {
      const inside = spec.inside && base - top > FONT + 4;
      const above = error > 0 ? y(spec.values[k] + error) : top; // a label above the bar clears its error bar
      parts.push(text(centre, inside ? top + FONT + 2 : above - 3, spec.text[k], `class="bar-text" text-anchor="middle" font-size="${FONT}" fill="${inside ? "#fff" : INK}"`));
    }
    if (!numeric && cat.shown(k)) parts.push(text(centre, area.bottom + 15 + cat.row(k) * (FONT + 3), spec.labels[k], `class="x-label" text-anchor="middle" font-size="${FONT}" fill="${MUTED}"`));
  }
  for (const line of spec.lines || []) {
    const ly = y(line.value).toFixed(1);
    parts.push(`<line x1="${area.left}" x2="${area.right}" y1="${ly}" y2="${ly}" stroke="${MUTED}" stroke-dasharray="4 3"/>`);
    parts.push(text(area.right - 2, y(line.value) - 3, line.name, `class="level" text-anchor="end" font-size="${FONT}" fill="${MUTED}"`));
  }
  if (numeric) {
    const xt = ticks(spec.xRange[0], spec.xRange[1], Math.max(2, Math.floor(area.width / 70)));
    const step = xt.length > 1 ? xt[1] - xt[0] : 1;
    for (const v of xt) parts.push(text(x(v), area.bottom + 15, tickLabel(v, step), `text-anchor="middle" font-size="${FONT}" fill="${MUTED}"`));
  }
  return svg(width, spec.height, parts);
}

function groupedBars(spec, width) {
  const names = spec.groups.map((g) => g.name);
  const legend = legendRows(names, width);
  const height = spec.height + legend.height;
  const all = spec.groups.flatMap((g) => g.values);
  const lo = Math.min(0, ...all);
  const hi = Math.max(0, ...all);
  const yRange = spec.yRange || [lo * 1.1, hi * 1.1 || 1];
  const { parts, area, y, xTitleBottom } = frame({ ...spec, height, yRange, top: all }, width, legend.height + 4);
  const cat = categories(area, spec.labels);
  const G = spec.groups.length;
  const w = (cat.band * 0.8) / G;
  spec.labels.forEach((label, k) => {
    spec.groups.forEach((g, i) => {
      const x0 = cat.at(k) - cat.band * 0.4 + i * w;
      const [a, b] = [y(Math.max(g.values[k], 0)), y(Math.min(g.values[k], 0))];
      const tip = `<title>${escape(`${label}, ${g.name}: ${Number(g.values[k]).toFixed(3)}`)}</title>`;
      parts.push(`<rect x="${x0.toFixed(1)}" y="${a.toFixed(1)}" width="${Math.max(w, 0.5).toFixed(1)}" height="${Math.max(b - a, 0.5).toFixed(1)}" fill="${g.colour}">${tip}</rect>`);
    });
    if (cat.shown(k)) parts.push(text(cat.at(k), area.bottom + 15, label, `text-anchor="middle" font-size="${FONT}" fill="${MUTED}"`));
  });
  if (lo < 0) parts.push(`<line x1="${area.left}" x2="${area.right}" y1="${y(0).toFixed(1)}" y2="${y(0).toFixed(1)}" stroke="${MUTED}"/>`);
  const colours = spec.groups.map((g) => g.colour);
  drawLegend(parts, legend, names, colours, width, xTitleBottom, (x, ly, c) => `<rect x="${x.toFixed(1)}" y="${(ly - 5).toFixed(1)}" width="18" height="10" fill="${c}"/>`);
  return svg(width, height, parts);
}

// A line chart. spec: {title, xTitle, yTitle, height, yRange?, x (the points' positions, e.g. iterations 1..T),
// series: [{name, values}], marker? (an x where a dotted line stands: the iteration shown)}; a legend below names each series
export function lineChart(spec, width) {
  const names = spec.series.map((s) => s.name);
  const legend = legendRows(names, width);
  const legendHeight = legend.height;
  const height = spec.height + legendHeight;
  const all = spec.series.flatMap((s) => s.values);
  const { parts, area, y, xTitleBottom } = frame({ ...spec, height, top: all }, width, legendHeight + 4);
  const [lo, hi] = [Math.min(...spec.x), Math.max(...spec.x)];
  const pad = hi > lo ? 0 : 1;
  const x = (v) => area.left + 8 + ((v - lo + pad / 2) / (hi - lo + pad)) * (area.width - 16);
  for (const v of spec.x) parts.push(text(x(v), area.bottom + 15, String(v), `text-anchor="middle" font-size="${FONT}" fill="${MUTED}"`));
  if (spec.marker !== undefined) {
    parts.push(`<line x1="${x(spec.marker).toFixed(1)}" x2="${x(spec.marker).toFixed(1)}" y1="${area.top}" y2="${area.bottom}" stroke="${MUTED}" stroke-dasharray="3 3"/>`);
  }
  spec.series.forEach((s, k) => {
    const colour = COLOURS[k % COLOURS.length];
    const points = spec.x.map((v, n) => `${x(v).toFixed(1)},${y(s.values[n]).toFixed(1)}`);
    parts.push(`<polyline points="${points.join(" ")}" fill="none" stroke="${colour}" stroke-width="2"/>`);
    spec.x.forEach((v, n) => {
      const tip = `<title>${escape(`${s.name}, ${spec.xTitle} ${v}: ${Number(s.values[n]).toFixed(3)}`)}</title>`;
      parts.push(`<circle cx="${x(v).toFixed(1)}" cy="${y(s.values[n]).toFixed(1)}" r="3" fill="${colour}">${tip}</circle>`);
    });
  });
  const colours = spec.series.map((_, k) => COLOURS[k % COLOURS.length]);
  drawLegend(parts, legend, names, colours, width, xTitleBottom, (x, ly, c) => `<line x1="${x.toFixed(1)}" x2="${(x + 18).toFixed(1)}" y1="${ly.toFixed(1)}" y2="${ly.toFixed(1)}" stroke="${c}" stroke-width="2"/>`);
  return svg(width, height, parts);
}
