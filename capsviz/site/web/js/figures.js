// The app's tour figures that the site draws from the numbers `capsviz site` exported with the
// tour's words (capsviz/site/tours.py): the primary capsules' arrows, and the routing and EM planes
// of the winner and the runner-up. Pure: numbers in, SVG markup out (tests/figures.test.js runs it
// in node); the tour view puts it in the page. Each keeps the app figure's rules (capsviz/viz/teach.py).
import { COLOURS, escape, wrap } from "./chart.js";

const INK = "#1b1f24";
const MUTED = "#5a6570";
const RED = "#d62728";

function arrowLine(x1, y1, x2, y2, colour, width, opacity = 1, dash = "") {
  const angle = Math.atan2(y2 - y1, x2 - x1);
  const head = Math.min(8, Math.hypot(x2 - x1, y2 - y1) / 2);
  const [hx1, hy1] = [x2 - head * Math.cos(angle - 0.45), y2 - head * Math.sin(angle - 0.45)];
  const [hx2, hy2] = [x2 - head * Math.cos(angle + 0.45), y2 - head * Math.sin(angle + 0.45)];
  const f = (v) => v.toFixed(1);
  const style = `stroke="${colour}" stroke-width="${width}" stroke-opacity="${opacity.toFixed(3)}"${dash ? ` stroke-dasharray="${dash}"` : ""}`;
  return `<line x1="${f(x1)}" y1="${f(y1)}" x2="${f(x2)}" y2="${f(y2)}" ${style}/><polyline points="${f(hx1)},${f(hy1)} ${f(x2)},${f(y2)} ${f(hx2)},${f(hy2)}" fill="none" ${style}/>`;
}

// The longest primary capsule at each of the G x G places as an arrow: its length the capsule's
// length (a full half-cell is 1), its direction the pose projected on two directions; a dot where
// an arrow would be too short to see. lengths (G, G), directions (G, G, 2); `image` an optional
// picture (a data URL) drawn faint under the grid.
export function arrowsSvg(lengths, directions, size, image = null) {
  const G = lengths.length;
  const cell = size / G;
  const parts = [`<rect width="${size}" height="${size}" fill="#fff"/>`];
  if (image) parts.push(`<image href="${escape(image)}" width="${size}" height="${size}" opacity="0.3" preserveAspectRatio="none" style="image-rendering: pixelated"/>`);
  for (let r = 0; r < G; r++) {
    for (let q = 0; q < G; q++) {
      const [cx, cy] = [(q + 0.5) * cell, (r + 0.5) * cell];
      parts.push(`<rect x="${(q * cell).toFixed(1)}" y="${(r * cell).toFixed(1)}" width="${cell.toFixed(1)}" height="${cell.toFixed(1)}" fill="none" stroke="#dcdcdc"/>`);
      const L = lengths[r][q] * cell * 0.48;
      const [dx, dy] = [directions[r][q][0] * L, directions[r][q][1] * L];
      const tip = `<title>${escape(lengths[r][q].toFixed(3))}</title>`;
      if (L < 2) parts.push(`<circle cx="${cx.toFixed(1)}" cy="${cy.toFixed(1)}" r="2" fill="${RED}">${tip}</circle>`);
      else parts.push(`<g>${tip}${arrowLine(cx - dx / 2, cy + dy / 2, cx + dx / 2, cy - dy / 2, RED, 2.5)}</g>`);
    }
  }
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${size}" height="${size}" viewBox="0 0 ${size} ${size}" aria-hidden="true">${parts.join("")}</svg>`;
}

// the half-width of the planes: every point drawn, and each mean with two spreads (as the app's _limit)
export function planeLimit(d) {
  let top = 0;
  for (const panel of d.points) for (const [x, y] of panel) top = Math.max(top, Math.abs(x), Math.abs(y));
  for (const key of ["v", "mu"]) for (const [x, y] of d[key] || []) top = Math.max(top, Math.abs(x), Math.abs(y));
  if (d.mu && d.sigma) d.mu.forEach(([x, y], k) => (top = Math.max(top, Math.abs(x) + 2 * d.sigma[k][0], Math.abs(y) + 2 * d.sigma[k][1])));
  return 1.15 * (top || 1);
}

// The winner's and the runner-up's planes of one routing (or EM) iteration, side by side. d: the
// exported numbers (points (2, SHOWN, 2), weights (2, SHOWN): c or R, and for dynamic routing s, v
// (2, 2) with s_len, v_len, for EM mu, sigma (2, 2) and a (2,)); `labels`: each panel's name and the
// line under it, already in words.
export function planesSvg(d, labels, width) {
  const panel = Math.max(140, Math.min(300, (width - 24) / 2));
  const under = labels.map((l) => (l[1] ? wrap(l[1], panel - 4, 12) : [])); // the line under each panel, wrapped to its width
  const height = panel + 30 + 15 * Math.max(1, ...under.map((u) => u.length));
  const limit = planeLimit(d);
  const parts = [];
  d.points.forEach((points, j) => {
    const x0 = 8 + j * (panel + 8);
    const X = (x) => x0 + panel / 2 + (x / limit) * (panel / 2);
    const Y = (y) => 18 + panel / 2 - (y / limit) * (panel / 2);
    const colour = COLOURS[j];
    parts.push(`<text x="${(x0 + panel / 2).toFixed(1)}" y="12" text-anchor="middle" font-size="12" fill="${INK}">${escape(labels[j][0])}</text>`);
    parts.push(`<rect x="${x0}" y="18" width="${panel.toFixed(1)}" height="${panel.toFixed(1)}" fill="#fff" stroke="#ccc"/>`);
    parts.push(`<line x1="${X(-limit)}" x2="${X(limit)}" y1="${Y(0)}" y2="${Y(0)}" stroke="#e3e7eb"/><line x1="${X(0)}" x2="${X(0)}" y1="${Y(-limit)}" y2="${Y(limit)}" stroke="#e3e7eb"/>`);
    // the scale: the plot's half-width at each end of the axes, the same in both panels; below the x axis
    // and left of the y axis, as a point's number sits above and right of it
    const end = limit.toFixed(limit < 10 ? 2 : 1);
    const tick = (x, y, anchor, text) => `<text x="${x.toFixed(1)}" y="${y.toFixed(1)}" class="tick" text-anchor="${anchor}" font-size="10" fill="${MUTED}">${text}</text>`;
    parts.push(tick(X(-limit) + 2, Y(0) + 11, "start", `−${end}`), tick(X(limit) - 2, Y(0) + 11, "end", end));
    parts.push(tick(X(0) - 3, Y(limit) + 11, "end", end), tick(X(0) - 3, Y(-limit) - 3, "end", `−${end}`));
    if (d.v) parts.push(`<circle cx="${X(0)}" cy="${Y(0)}" r="${((panel / 2) / limit).toFixed(1)}" fill="none" stroke="#aaa" stroke-dasharray="2 3"/>`); // squash's bound
    points.forEach(([x, y], i) => {
      const w = Math.min(Math.max(d.weights[j][i], 0), 1);
      const opacity = 0.15 + 0.85 * w;
      const tip = `<title>${escape(`${d.shown[i]}: ${w.toFixed(3)}`)}</title>`;
      if (d.v) parts.push(`<g>${tip}${arrowLine(X(0), Y(0), X(x), Y(y), colour, 2, opacity)}</g>`);
      else parts.push(`<circle cx="${X(x).toFixed(1)}" cy="${Y(y).toFixed(1)}" r="5" fill="${d.fit ? INK : colour}" fill-opacity="${d.fit ? opacity.toFixed(3) : 1}">${tip}</circle>`);
      parts.push(`<text x="${(X(x) + 4).toFixed(1)}" y="${(Y(y) - 4).toFixed(1)}" font-size="10" fill="${MUTED}">${i + 1}</text>`);
    });
    if (d.v) {
      parts.push(arrowLine(X(0), Y(0), X(d.s[j][0]), Y(d.s[j][1]), INK, 1.5, 1, "5 3"));
      parts.push(arrowLine(X(0), Y(0), X(d.v[j][0]), Y(d.v[j][1]), INK, 3.5));
    } else if (d.fit) {
      const [mx, my] = d.mu[j];
      for (const k of [1, 2]) {
        const [rx, ry] = [(k * d.sigma[j][0] * panel) / 2 / limit, (k * d.sigma[j][1] * panel) / 2 / limit];
        parts.push(`<ellipse cx="${X(mx).toFixed(1)}" cy="${Y(my).toFixed(1)}" rx="${rx.toFixed(1)}" ry="${ry.toFixed(1)}" fill="none" stroke="${colour}" stroke-opacity="${k === 1 ? 0.9 : 0.5}"/>`);
      }
      parts.push(`<path d="M${(X(mx) - 6).toFixed(1)},${Y(my).toFixed(1)}h12M${X(mx).toFixed(1)},${(Y(my) - 6).toFixed(1)}v12" stroke="${INK}" stroke-width="2"/>`);
    }
    under[j].forEach((line, k) =>
      parts.push(`<text x="${(x0 + panel / 2).toFixed(1)}" y="${(panel + 34 + 15 * k).toFixed(1)}" class="under" text-anchor="middle" font-size="12" fill="${INK}">${escape(line)}</text>`),
    );
  });
  const total = 16 + d.points.length * (panel + 8);
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${total.toFixed(0)}" height="${height.toFixed(0)}" viewBox="0 0 ${total.toFixed(0)} ${height.toFixed(0)}" aria-hidden="true">${parts.join("")}</svg>`;
}

// A little Markdown, as the tour's sentences use it (**bold**, *italic*), into safe markup: every
// other character is escaped
export function inline(markdown) {
  return escape(markdown)
    .replace(/\*\*([^*]+)\*\*/g, "<strong>$1</strong>")
    .replace(/\*([^*]+)\*/g, "<em>$1</em>");
}
