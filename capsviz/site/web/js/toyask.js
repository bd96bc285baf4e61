// The playground's question, the app's (capsviz.analysis.questions.routed_split): after T iterations
// (or the one pass of self-attention), where will lower capsule k send its prediction? Its words are
// the app's catalog messages (the manifest's), its answer the app's rule (the manifest's "near uniform"
// rule, js/rules.js) on the couplings the page's own routing gives. The choices come in a fixed order
// (each upper capsule, then "near uniform"), where the app shuffles them by the question's id.
// Pure: tests/toyask.test.js feeds it the app's toy states and compares with the app's question.
import { argmax, uniformShare } from "./numbers.js";
import { decide } from "./rules.js";
import { say, sayCounted } from "./words.js";

export const UNIFORM = "uniform"; // the key of "still near uniform", as the app's

// where a lower capsule with couplings `c` (J) sends its prediction: UNIFORM when near uniform by the
// app's rule, else the number (from 1) of the upper capsule with the largest coupling
export function splitOf(c, rules) {
  const J = c.length;
  const values = { evenness: uniformShare(c, 1, J), share: Math.max(...c), uniform: 1 / J };
  return decide(rules, "near uniform", values).id === "couplings_near_uniform" ? UNIFORM : String(argmax(c) + 1);
}

// a short, fixed name for what a question is about (its settings and predictions): the key its answer is kept under
export function toyId(parts) {
  const text = JSON.stringify(parts);
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return `split:${(h2 >>> 0).toString(16).padStart(8, "0")}${(h1 >>> 0).toString(16).padStart(8, "0")}`;
}

// The question about lower capsule `k` (0-based) whose couplings after the last of `T` iterations (or
// the one pass, `attention`) are `c` (J), as js/asking.js shows it: {qid, page, text, keys, labels,
// answer, why, verdicts}, in the language of the messages in use
export function toyQuestion({ qid, c, T, k, attention }, rules) {
  const J = c.length;
  const answer = splitOf(c, rules);
  const keys = [...Array.from({ length: J }, (_, j) => String(j + 1)), UNIFORM];
  const labels = keys.map((key) => (key === UNIFORM ? say("pg_ask_uniform") : say("pg_ask_upper", { j: key })));
  const named = (key) => labels[keys.indexOf(key)];
  const [share, uniform] = [Math.max(...c).toFixed(2), (1 / J).toFixed(2)];
  const why = answer === UNIFORM ? say("pg_why_uniform", { share, uniform }) : say("pg_why_upper", { j: answer, share, uniform });
  const text = attention ? say("pg_ask_attention", { k: k + 1 }) : sayCounted("pg_ask_after", T, { k: k + 1 });
  const verdicts = { "": say("ask_skipped", { answer: named(answer) }) };
  for (const key of keys) verdicts[key] = key === answer ? say("ask_right", { answer: named(answer) }) : say("ask_wrong", { mine: named(key), answer: named(answer) });
  return { qid, page: "playground", text, keys, labels, answer, why, verdicts };
}
