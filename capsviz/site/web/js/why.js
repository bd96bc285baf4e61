// The "Why capsules" chapter's numbers for one digit, from the graphs' outputs for each change of it:
// what capsviz.analysis.why.one_image and parts_views compute with PyTorch. Pure: tests/why.test.js
// runs it in node.

function norm(a) {
  let s = 0;
  for (const x of a) s += x * x;
  return Math.sqrt(s);
}

export function argmax(a) {
  let best = 0;
  for (let i = 1; i < a.length; i++) if (a[i] > a[best]) best = i;
  return best;
}

// the angle in degrees between a and b, as torch's cosine_similarity (each norm at least 1e-8) and acos give it
export function angle(a, b) {
  let dot = 0;
  for (let d = 0; d < a.length; d++) dot += a[d] * b[d];
  const cos = dot / (Math.max(norm(a), 1e-8) * Math.max(norm(b), 1e-8));
  return (Math.acos(Math.min(1, Math.max(-1, cos))) * 180) / Math.PI;
}

// |b - a| / |a|: how far b moved, as a share of a's size
export function relative(a, b) {
  const diff = a.map((x, k) => b[k] - x);
  return norm(diff) / Math.max(norm(a), 1e-8);
}

// One digit under every value of a change (`values`, 0 among them). capsules[k]: the class capsules
// (J arrays of D) under value k; scores[k]: the CNN's class scores; features[k]: its pooled features.
// -> the winning capsule j (longest on the unchanged digit), its vectors, lengths and angles from the
// unchanged one, the CNN's answer on the unchanged digit, its score for it and its features' change (%).
export function oneImage(values, capsules, scores, features) {
  const zero = values.indexOf(0);
  const j = argmax(capsules[zero].map(norm));
  const vectors = capsules.map((v) => Array.from(v[j]));
  const answer = argmax(scores[zero]);
  return {
    values,
    capsule: j,
    vectors,
    lengths: vectors.map(norm),
    angles: vectors.map((w) => angle(vectors[zero], w)),
    cnn_answer: answer,
    cnn_score: scores.map((p) => p[answer]),
    cnn_features: features.map((f) => 100 * relative(features[zero], f)),
  };
}

// the numbers of the sentence about value `amount` (capsviz.analysis.why.one_image_words): the
// dimensions that moved by `step` or more, and the rest as the sentence quotes them
export function oneImageNumbers(view, names, amount, step) {
  const k = view.values.indexOf(amount);
  const zero = view.values.indexOf(0);
  const moves = view.vectors[k].filter((x, d) => Math.abs(x - view.vectors[zero][d]) >= step).length;
  return {
    name: names[view.capsule],
    l0: view.lengths[zero],
    l1: view.lengths[k],
    angle: view.angles[k],
    moves,
    dims: view.vectors[k].length,
    step,
    cnn_name: names[view.cnn_answer],
    s0: view.cnn_score[zero],
    s1: view.cnn_score[k],
    features: view.cnn_features[k],
  };
}

// each changed digit's answers (capsviz.analysis.why.parts_views): the CNN's class and score, the
// capsules' longest class and its length
export function answers(capsules, scores) {
  return capsules.map((v, k) => {
    const lengths = v.map(norm);
    const i = argmax(scores[k]);
    const j = argmax(lengths);
    return { cnn: i, score: scores[k][i], caps: j, length: lengths[j] };
  });
}
