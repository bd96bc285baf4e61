// The dynamic-routing CapsNet tour's sentences on numbers the browser computes, for any image (a
// drawing included): the app's messages (capsviz/site/said.py, the words file's "tour_said") filled
// as capsviz.analysis.steps and capsviz.families.capsnet.tour fill them. tests/test_site_js.py runs
// the app's walk and this on the same real traces and compares every sentence in every language.
// Pure: no page. `S` is the words file's tour_said; `res` what runtime.computeFor returns.
import { argmax, couplingsAt, lengthsAt, range } from "./numbers.js";
import { fill } from "./words.js";

// x with d decimals as Python's format writes it: the exact value rounded, a tie to the even digit
export function pyFixed(x, d) {
  const exact = Math.abs(x).toFixed(Math.min(100, d + 60)); // toFixed's digits are the exact value's
  const rest = exact.slice(exact.indexOf(".") + 1 + d);
  if (!/^50*$/.test(rest)) return x.toFixed(d);
  const n = Math.floor(Math.abs(x) * 10 ** d); // a tie: the digits before it are exact
  return `${x < 0 ? "-" : ""}${((n % 2 === 0 ? n : n + 1) / 10 ** d).toFixed(d)}`;
}
const two = (x) => pyFixed(x, 2);
const three = (x) => pyFixed(x, 3);
const pct = (x, d) => `${pyFixed(100 * x, d)}%`; // Python's {:.d%}: 100 x, then fixed
const thousands = (n) => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ","); // Python's {:,}

const say = (S, id, v) => fill(S.messages[id], v);
// a counted message's form for n: past the forms exported (said.py COUNTS), the last one, which every count from 2 up shares
const counted = (S, id, n, v) => {
  const forms = S.counted[id];
  return fill(forms[String(n)] ?? forms[String(Object.keys(forms).length)], { n, ...v });
};
const join = (S, ...parts) => parts.filter(Boolean).join(S.gap);

// indices of `a` from the largest value to the smallest, ties in order (numpy's stable argsort of -a)
function descending(a) {
  return Array.from(a.keys()).sort((x, y) => a[y] - a[x]);
}

function norm(a, from, n) {
  let s = 0;
  for (let k = from; k < from + n; k++) s += a[k] * a[k];
  return Math.sqrt(s);
}

// The numbers the sentences quote, from one result of the encoder and dynamic routing over T iterations
export function traced(res, T) {
  const { I, J, D } = res;
  const K = res.u.length / I;
  const primary = Float64Array.from({ length: I }, (_, i) => norm(res.u, i * K, K)); // |u_i|, grid order (G, G, types)
  const pred = Float64Array.from({ length: I * J }, (_, n) => norm(res.uHat, ((n % J) * I + Math.floor(n / J)) * D, D)); // (I, J) |u_hat_j|i|
  const lengths = lengthsAt(res, T);
  const [W, R] = descending(lengths);
  const toW = Float64Array.from({ length: I }, (_, i) => pred[i * J + W]);
  const shown = descending(toW).slice(0, 6);
  const iterations = Array.from({ length: T }, (_, t) => {
    const c = couplingsAt(res, t);
    const v = lengthsAt(res, t + 1);
    const sLen = Array.from({ length: J }, (_, j) => {
      const s = new Float64Array(D);
      for (let i = 0; i < I; i++) for (let d = 0; d < D; d++) s[d] += c[i * J + j] * res.uHat[(j * I + i) * D + d];
      return norm(s, 0, D);
    });
    let evenness = 0;
    let mean = 0;
    let weighted = 0;
    let weights = 0;
    for (let i = 0; i < I; i++) {
      let h = 0;
      for (let j = 0; j < J; j++) {
        const p = c[i * J + j];
        h -= p * Math.log(Math.min(Math.max(p, 1e-12), 1));
      }
      evenness += h / Math.log(J);
      mean += c[i * J + W];
      weighted += c[i * J + W] * toW[i];
      weights += toW[i];
    }
    return { c, sLen, vLen: Array.from(v), evenness: evenness / I, mean: mean / I, weighted: weighted / Math.max(weights, 1e-12) };
  });
  return { I, J, D, primary, pred, lengths: Array.from(lengths), W, R, shown, iterations };
}

// where primary capsule i sits: "type 3 at row 2, col 5"
function place(S, i, G, K) {
  return say(S, "place", { type: (i % K) + 1, row: Math.floor(Math.floor(i / K) / G) + 1, col: (Math.floor(i / K) % G) + 1 });
}

// the primary step's measured sentence (steps.saturation_words and the longest capsule) and whether it warns
export function primarySaid(S, tr, G, K, shown) {
  const n = tr.primary.length;
  let long = 0;
  for (const x of tr.primary) if (x > S.limits.saturated) long += 1;
  const share = long / n;
  const [lo, hi] = range(tr.primary);
  const v = { share: pct(share, 0), n, limit: S.written.saturated, lo: two(lo), hi: two(hi), shown };
  if (share > S.limits.most) return { measured: say(S, "sat_most", v), warn: true };
  const i = argmax(tr.primary);
  const top = say(S, "longest", { type: (i % K) + 1, row: Math.floor(Math.floor(i / K) / G) + 1, col: (Math.floor(i / K) % G) + 1, length: two(tr.primary[i]) });
  return { measured: join(S, say(S, "sat", v), top), warn: false };
}

function ordinal(S, n) {
  return n === 1 ? say(S, "first") : n === 2 ? say(S, "second") : n === 3 ? say(S, "third") : say(S, "nth", { n });
}

// the predictions step's measured sentence: the first followed capsule's votes (steps.prediction_words)
export function predictionSaid(S, tr, names, G, K, thing) {
  const i = tr.shown[0];
  const lengths = Array.from({ length: tr.J }, (_, j) => tr.pred[i * tr.J + j]);
  const order = descending(lengths);
  const W = tr.W;
  const rank = order.indexOf(W) + 1;
  const [top, low] = [order[0], order[order.length - 1]];
  const v = { name: `P1 (${place(S, i, G, K)})`, w: names[W], w_len: two(lengths[W]), low: names[low], low_len: two(lengths[low]), thing };
  Object.assign(v, { top: names[top], top_len: two(lengths[top]), next: names[order[1]], next_len: two(lengths[order[1]]), ordinal: ordinal(S, rank) });
  v.own = two(tr.primary[i]);
  const said = say(S, rank === 1 ? "pred_1" : rank === 2 ? "pred_2" : "pred_n", v);
  return join(S, said, say(S, rank === 1 ? "pred_top" : "pred_other", v));
}

function squash(S, s, v, sLen, vLen) {
  const w = { s, v, s_len: two(sLen), v_len: two(vLen) };
  const n = Number(two(sLen));
  return say(S, two((n * n) / (1 + n * n)) !== two(vLen) ? "squash_rounded" : "squash", w);
}

function shareWords(S, x) {
  const [lo, hi] = range(x).map(two);
  return lo === hi ? say(S, "share_each", { lo }) : say(S, "share_range", { lo, hi });
}

function uniformWords(S, evenness, share, uniform) {
  const v = { evenness: pct(evenness, 1), limit: S.written.entropy, n: Math.round(1 / uniform), share: two(share), factor: S.written.share, uniform: two(uniform) };
  const more = evenness > S.limits.entropy;
  const low = share < S.limits.share * uniform;
  return say(S, more && low ? "uniform_near" : more ? "uniform_share" : low ? "uniform_low" : "uniform_away", v);
}

function longVotes(S, name, weighted, uniform, plain) {
  if (!(weighted >= S.limits.share * uniform)) return ""; // rules.long_votes_move
  const v = { name, weighted: three(weighted), times: pyFixed(weighted / uniform, 1) };
  if (plain < S.limits.share * uniform) return say(S, "long_mainly", v);
  Object.assign(v, { plain: three(plain), plain_times: pyFixed(plain / uniform, 1) });
  return say(S, weighted > plain ? "long_more" : "long_no_more", v);
}

// routing iteration `it` (0-based): the step's two paragraphs and its measured sentence (steps.coupling_words)
export function iterationSaid(S, tr, it, names, capsule) {
  const { I, J, W, R } = tr;
  const L = S.labels;
  const at = tr.iterations[it];
  const first = it === 0 ? say(S, "iter_first", { b: L.b, c: L.c, J, uniform: two(1 / J) }) : say(S, "iter_next", { k: it + 1, b: L.b, agreement: L.agreement });
  const sums = say(S, "iter_sums", {
    capsule,
    s: L.s,
    v: L.v,
    winner: squash(S, `s_${names[W]}`, `v_${names[W]}`, at.sLen[W], at.vLen[W]),
    second: squash(S, `s_${names[R]}`, `v_${names[R]}`, at.sLen[R], at.vLen[R]),
  }); // without the app's "iter_figure": the site draws no planes for its own images
  const shownC = tr.shown.map((i) => at.c[i * J + W]);
  const u = 1 / J;
  const v = { few: shownC.length, name: names[W], loud: shareWords(S, shownC), capsules: thousands(I), mean: three(at.mean), u: three(u) };
  let measured;
  if (it === 0) {
    measured = say(S, "coupled_first", { ...v, weighted: three(at.weighted) });
  } else {
    const factor = S.limits.share;
    Object.assign(v, { factor: S.written.share, top: two(Math.max(...shownC)) });
    const reached = shownC.filter((x) => x >= factor * u).length;
    let loud;
    if (Math.max(...shownC) >= factor * u && at.mean < factor * u) loud = reached === shownC.length ? say(S, "loud_all", v) : counted(S, "loud_some", reached, v);
    else loud = say(S, at.mean >= factor * u ? "loud_mean" : "loud_none", v);
    const verdict = uniformWords(S, at.evenness, at.mean, u);
    const who = say(S, "who");
    const rule = it > 1 ? say(S, "rule_stated", { where: say(S, "iteration", { k: 2 }), who, verdict }) : say(S, "rule_full", { who, verdict, rule: S.rule });
    measured = join(S, loud, say(S, "weighted", { weighted: three(at.weighted) }), rule, longVotes(S, names[W], at.weighted, u, at.mean));
  }
  return { text: [first, sums], measured };
}

// the lengths step's measured sentence (steps.margin_words): against the label `right`, or the longest capsule (null: a drawing)
export function marginSaid(S, lengths, names, right) {
  const j = right === null ? argmax(lengths) : right;
  const others = names.map((_, k) => k).filter((k) => k !== j);
  const top = others.reduce((a, k) => (lengths[k] > lengths[a] ? k : a), others[0]);
  const loud = others.filter((k) => lengths[k] >= S.limits.absent).length;
  const present = lengths[j] > S.limits.present;
  const v = { name: names[j], length: two(lengths[j]), present: S.written.present, absent: S.written.absent, top: names[top], top_len: two(lengths[top]), others: others.length };
  const who = right === null ? "longest" : "label";
  const said = loud ? counted(S, `margin_${who}_loud_${present ? "met" : "short"}`, loud, v) : say(S, `margin_${who}_${present ? "met" : "short"}`, v);
  return say(S, "measured", { said });
}

// The walk's paragraphs of each step that name only the model, the image's sizes and its winner
export function inputText(S, model, T, capsule) {
  const trained = T === 1 ? say(S, "trained_one", { routing: S.one_iteration[0], why: S.one_iteration[1] }) : say(S, "trained", { n: T });
  return [join(S, say(S, "input", { model, trained, capsule }), say(S, "input_vector"))];
}

export function conv1Text(S, digits, channels) {
  const v = { conv1: S.labels.conv1, n: channels, shown: Math.min(S.maps, channels) };
  return [join(S, say(S, digits ? "conv1_digits" : "conv1", v), say(S, "conv1_neurons"))];
}

export function primaryText(S, tr, G, K) {
  return [say(S, "primary", { primary: S.labels.primary, n: tr.I, k: K, g: G })];
}

export function predictionsText(S, tr, names, digits, capsule, thing) {
  const L = S.labels;
  const an = "aeiou".includes(String(names[tr.W]).slice(0, 1).toLowerCase()) && String(names[tr.W]).length > 0;
  const v = { W: L.W, capsule, I: tr.I, J: tr.J, u_hat: L.u_hat, D: tr.D, thing, name: names[tr.W] };
  const guess = say(S, digits ? (an ? "guess_digit_an" : "guess_digit") : an ? "guess_an" : "guess", v);
  return [join(S, guess, say(S, "vote", { primary_length: L.primary_length, thing, c: L.c }))];
}

// the lengths step's paragraphs: the answer against the label `truth` (none for a drawing, which has no label) and the margin loss
export function lengthsText(S, tr, names, capsule, truth) {
  const margin = join(S, say(S, "margin", { margin_loss: S.labels.margin_loss }), say(S, "overlap"));
  if (truth === null) return [margin];
  const { W, R, lengths } = tr;
  return [say(S, "answer", { capsule, winner: names[W], length: two(lengths[W]), truth, second: names[R], second_len: two(lengths[R]) }), margin];
}

export function reconstructionText(S, tr, names, digits, shown) {
  const v = { reconstruction: S.labels.reconstruction, shown, D: tr.D, name: names[tr.W] };
  return [join(S, say(S, "decoder", v), say(S, "decoder_keeps", v), say(S, digits ? "explorer_digits" : "explorer", { D: tr.D }))];
}

// ---------- Efficient-CapsNet (capsviz.families.efficient_capsnet.tour): one pass of self-attention ----------

// index of the largest value, the first of ties (numpy's argmax)
function first(a) {
  return a.reduce((b, x, k) => (x > a[b] ? k : b), 0);
}

// The numbers its sentences quote, from runtime.computeFor with self-attention: u (I, K), u_hat (J, I, D), c (I, J), v (J, D)
export function efficientTraced(res) {
  const { I, J, D } = res;
  const K = res.u.length / I;
  const primary = Float64Array.from({ length: I }, (_, i) => norm(res.u, i * K, K));
  const pred = Float64Array.from({ length: I * J }, (_, n) => norm(res.uHat, ((n % J) * I + Math.floor(n / J)) * D, D)); // (I, J)
  const lengths = Array.from({ length: J }, (_, j) => norm(res.v, j * D, D));
  const [W, R] = descending(lengths);
  const c = Array.from({ length: I }, (_, i) => Array.from(res.c.slice(i * J, (i + 1) * J)));
  const entropy = c.map((row) => row.reduce((h, p) => h - p * Math.log(Math.max(p, 1e-12)), 0) / Math.log(J));
  return { I, J, D, K, primary, pred, lengths, W, R, c, entropy };
}

export function efficientPrimarySaid(S, tr) {
  const [lo, hi] = range(tr.primary);
  const n = tr.primary.filter((x) => x > S.limits.saturated).length;
  return say(S, "eff_primary_measured", { lo: two(lo), hi: two(hi), n, I: tr.I, limit: S.written.saturated });
}

export function efficientPredictionsText(S, tr) {
  return [say(S, "eff_predictions", { K: tr.K, D: tr.D, W: S.labels.W, I: tr.I, J: tr.J, u_hat: S.labels.u_hat })];
}

export function efficientPredictionSaid(S, tr, names) {
  const toW = Array.from({ length: tr.I }, (_, i) => tr.pred[i * tr.J + tr.W]);
  const top = first(toW);
  const [lo, hi] = range(toW);
  return say(S, "eff_predictions_measured", { name: names[tr.W], top: top + 1, top_len: two(toW[top]), lo: two(lo), hi: two(hi) });
}

// the routing step's measured sentences the browser's numbers decide: the near-uniform rule on the
// image and on each capsule, and the capsules that send most of their vote to one class (the app's
// sentences on the learned prior b follow them there)
export function efficientRoutingSaid(S, tr, names) {
  const { I, J, W, c, entropy } = tr;
  const u = 1 / J;
  const share = c.reduce((t, row) => t + row[W], 0) / I;
  const who = say(S, "eff_who", { I, name: names[W] });
  const verdict = uniformWords(S, entropy.reduce((t, e) => t + e, 0) / I, share, u);
  const near = c.filter((row, i) => entropy[i] > S.limits.entropy && row[W] < S.limits.share * u).length;
  const decided = c.flatMap((row, i) => (Math.max(...row) > 0.5 ? [say(S, "eff_decided_one", { i: i + 1, share: two(Math.max(...row)), name: names[first(row)] })] : []));
  return join(
    S,
    say(S, "measured", { said: say(S, "rule_full", { who, verdict, rule: S.rule }) }),
    say(S, "eff_same_rule", { n: near, I }),
    decided.length ? say(S, "eff_decided", { capsules: decided.join(", ") }) : say(S, "eff_none_decided"),
  );
}

// the lengths step's paragraphs: the answer against the label `truth` (none for a drawing) and the margin loss
export function efficientLengthsText(S, tr, names, truth) {
  const margin = say(S, "eff_margin", { margin_loss: S.labels.margin_loss });
  if (truth === null) return [margin];
  const { W, R, lengths } = tr;
  return [say(S, "answer", { capsule: say(S, "eff_class_capsule"), winner: names[W], length: two(lengths[W]), truth, second: names[R], second_len: two(lengths[R]) }), margin];
}

export function efficientReconstructionText(S, tr, names, shown) {
  const v = { reconstruction: S.labels.reconstruction, shown, D: tr.D, name: names[tr.W], weight: S.written.mse_weight };
  return [join(S, say(S, "eff_decoder", v), say(S, "explorer", { D: tr.D }))];
}

// ---------- matrix capsules with EM routing (capsviz.families.matrix_capsnet.tour) ----------

// The numbers its sentences quote, from runtime.computeEM: the lower activations aIn (I,), R (T, I, J), a (T, J)
export function emTraced(res) {
  const { T, I, J } = res;
  const final = Array.from(res.a.slice((T - 1) * J, T * J));
  const [W, R] = descending(final);
  return { T, I, J, W, R, shown: descending(Array.from(res.aIn)).slice(0, 6), a: res.a, assigned: res.R };
}

export function emInputText(S, model) {
  return [say(S, "em_input", { model })];
}

// iteration `it` (0-based): the measured sentence
export function emIterationSaid(S, tr, it, names) {
  const { I, J, W, R, a } = tr;
  const toW = tr.shown.map((i) => tr.assigned[(it * I + i) * J + W]);
  const v = { w: names[W], a_w: two(a[it * J + W]), r: names[R], a_r: two(a[it * J + R]), layer: S.em_layer, share: shareWords(S, toW) };
  return say(S, "em_measured", v);
}

// the activations step's answer: the most active class capsule and the runner-up after the last
// iteration, against the label `truth` (null: a drawing, which has none; the walk's paragraph on the
// spread loss that follows it quotes lambda, which the site's graphs do not return)
export function emAnswerText(S, tr, names, truth) {
  const { T, J, W, R, a } = tr;
  const v = { w: names[W], a_w: two(a[(T - 1) * J + W]), r: names[R], a_r: two(a[(T - 1) * J + R]) };
  return [truth === null ? say(S, "em_answer_unlabelled", v) : say(S, "em_answer", { ...v, truth })];
}
