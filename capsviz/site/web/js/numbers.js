// The site's pure arithmetic on the graphs' outputs: no page, no runtime (tests/numbers.test.js runs it in node).
// A result `res` is what runtime.computeFor returns: u_hat's sizes I, J, D, the couplings c and the
// class capsules v of every recorded iteration (dynamic routing records ten; self-attention one pass).

// |v_j| after `iterations` iterations (the dynamic graph records ten; n iterations are its first n)
export function lengthsAt(res, iterations) {
  const { J, D } = res;
  const t = res.rule === "dynamic" ? iterations - 1 : 0;
  const out = new Float32Array(J);
  for (let j = 0; j < J; j++) {
    let s = 0;
    for (let d = 0; d < D; d++) s += res.v[(t * J + j) * D + d] ** 2;
    out[j] = Math.sqrt(s);
  }
  return out;
}

// class capsule j's vector after `iterations` iterations
export function vectorAt(res, iterations, j) {
  const t = res.rule === "dynamic" ? iterations - 1 : 0;
  return res.v.slice((t * res.J + j) * res.D, (t * res.J + j + 1) * res.D);
}

// the couplings (I, J) of iteration t (0-based)
export function couplingsAt(res, t) {
  const n = res.I * res.J;
  return res.c.slice(t * n, (t + 1) * n);
}

export function argmax(a) {
  let best = 0;
  for (let i = 1; i < a.length; i++) if (a[i] > a[best]) best = i;
  return best;
}

// the indices of `a` from its largest value to its smallest
export function order(a) {
  return Array.from(a.keys()).sort((x, y) => a[y] - a[x]);
}

// the couplings' evenness: their mean entropy over log J, 1 when each lower capsule splits its vote evenly
export function uniformShare(c, I, J) {
  let total = 0;
  for (let i = 0; i < I; i++) {
    let h = 0;
    for (let j = 0; j < J; j++) {
      const p = c[i * J + j];
      h -= p * Math.log(Math.min(Math.max(p, 1e-12), 1)); // as capsviz.analysis.coupling_entropy: a zero coupling adds 0
    }
    total += h;
  }
  return total / I / Math.log(J);
}

// the mean coupling to each class j over the I lower capsules
export function meanCouplings(c, I, J) {
  return Array.from({ length: J }, (_, j) => {
    let s = 0;
    for (let i = 0; i < I; i++) s += c[i * J + j];
    return s / I;
  });
}

// a CapsNet's couplings to each class over its G x G places, averaged over the K capsule types at each place
export function placeMaps(c, G, K, J) {
  return Array.from({ length: J }, (_, j) => {
    const map = new Float32Array(G * G);
    for (let p = 0; p < G * G; p++) {
      let s = 0;
      for (let k = 0; k < K; k++) s += c[(p * K + k) * J + j];
      map[p] = s / K;
    }
    return map;
  });
}

export function range(values) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    lo = Math.min(lo, v);
    hi = Math.max(hi, v);
  }
  return [lo, hi];
}

export function mean(values) {
  let s = 0;
  for (const v of values) s += v;
  return s / values.length;
}

// A graph's weights as `capsviz site` packed them (capsviz/site/__init__.py write_graph): every even byte, then every odd byte
// (two bytes written at once, as one little-endian 16-bit number: the byte order of WebAssembly and of every browser's CPU)
export function interleave(packed) {
  const half = packed.length / 2;
  const out = new Uint16Array(half);
  for (let k = 0; k < half; k++) out[k] = packed[k] | (packed[half + k] << 8);
  return new Uint8Array(out.buffer);
}

export function fmt(x, digits = 2) {
  return Number(x).toFixed(digits);
}

// "name value, name value, ...": the numbers of a chart or picture, for its text alternative
export function pairs(names, values, digits = 2) {
  return Array.from(values, (v, k) => `${names[k]} ${fmt(v, digits)}`).join(", ");
}

// the digits that tell near-equal percentages apart: 100, 99.99 and 99.91 differ only in the second
export function percentDigits(shares) {
  return shares.some((v) => v > 99) ? 2 : 1;
}

const VIRIDIS = [
  [68, 1, 84],
  [59, 82, 139],
  [33, 145, 140],
  [94, 201, 98],
  [253, 231, 37],
];
// x in [0, 1] -> [r, g, b] on viridis (x outside is clamped)
export function viridis(x) {
  const f = Math.min(Math.max(x, 0), 1) * (VIRIDIS.length - 1);
  const k = Math.min(Math.floor(f), VIRIDIS.length - 2);
  const w = f - k;
  return VIRIDIS[k].map((a, n) => Math.round(a + w * (VIRIDIS[k + 1][n] - a)));
}

// the indices 0..n-1 in as few runs of at most `most` as there are, evenly split (7 by 3: 2, 2, 3):
// a table's number columns stacked in parts that fit a phone, as the app's tour stacks them
export function columnParts(n, most) {
  const parts = Math.max(1, Math.ceil(n / most));
  return Array.from({ length: parts }, (_, k) => {
    const [from, to] = [Math.floor((k * n) / parts), Math.floor(((k + 1) * n) / parts)];
    return Array.from({ length: to - from }, (_, i) => from + i);
  });
}
