// EM routing's numbers for the EM view: the distance of every vote from its class capsule's mean pose
// at each iteration, and Fig. 2 of Hinton et al. (2018): those distances as histograms weighted by
// the assignments R, as capsviz.analysis.routing.vote_histograms makes them. Pure: tests/em.test.js.

// distances (T, I, J) from votes (I, J, H) to the mean poses mu (T, J, H)
export function distances(votes, mu, T, I, J, H) {
  const out = new Float32Array(T * I * J);
  for (let t = 0; t < T; t++) {
    for (let i = 0; i < I; i++) {
      for (let j = 0; j < J; j++) {
        let s = 0;
        for (let h = 0; h < H; h++) s += (votes[(i * J + j) * H + h] - mu[(t * J + j) * H + h]) ** 2;
        out[(t * I + i) * J + j] = Math.sqrt(s);
      }
    }
  }
  return out;
}

// (T, J, nbins) sums of R over [0, limit] in nbins equal bins, the last one closed; farther votes left out
export function histograms(dist, R, T, I, J, limit, nbins) {
  const out = new Float64Array(T * J * nbins);
  for (let t = 0; t < T; t++) {
    for (let i = 0; i < I; i++) {
      for (let j = 0; j < J; j++) {
        const d = dist[(t * I + i) * J + j];
        if (!(d >= 0 && d <= limit)) continue;
        const k = Math.min(Math.floor((d / limit) * nbins), nbins - 1);
        out[(t * J + j) * nbins + k] += R[(t * I + i) * J + j];
      }
    }
  }
  return out;
}

// the q-th percentile (0..100) of values, linearly between the two nearest (numpy's default)
export function percentile(values, q) {
  const v = Float64Array.from(values).sort();
  const at = (q / 100) * (v.length - 1);
  const lo = Math.floor(at);
  const hi = Math.min(lo + 1, v.length - 1);
  return v[lo] + (at - lo) * (v[hi] - v[lo]);
}

// x rounded up to `digits` significant digits: a limit that reads as it is and holds x (capsviz.analysis.explain.round_up)
export function roundUp(x, digits = 2) {
  if (x <= 0) return 0;
  const step = 10 ** (Math.floor(Math.log10(x)) - digits + 1);
  return Number((Math.ceil(x / step - 1e-9) * step).toPrecision(digits));
}

// the histograms' range: the nearest 99% of every iteration's and class's votes, rounded up; and the share it holds
export function histogramRange(dist) {
  const limit = roundUp(percentile(dist, 99));
  let n = 0;
  for (const d of dist) if (d <= limit) n += 1;
  return { limit, share: n / dist.length };
}

// total R each class capsule receives at each iteration: (T, J)
export function totals(R, T, I, J) {
  const out = new Float64Array(T * J);
  for (let t = 0; t < T; t++) for (let i = 0; i < I; i++) for (let j = 0; j < J; j++) out[t * J + j] += R[(t * I + i) * J + j];
  return out;
}
