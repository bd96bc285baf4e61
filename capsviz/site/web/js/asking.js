// Predict, then see: the app's question about what a view is about to show (capsviz/site/quiz.py
// exports it from capsviz.analysis.questions for the site's first test images), asked before the
// view draws its answer. A student's answers stay in this browser (js/answers.js) and nowhere else.
import { answer, keeps, remember } from "./answers.js";
import { el } from "./draw.js";
import { inline } from "./figures.js";
import { inflate } from "./runtime.js";
import { state } from "./store.js";
import { say } from "./words.js";

const files = new Map(); // a questions file -> Promise of its questions, one per explained image
// The question the open model's explorer asks about the image shown, or null: a drawing, an image
// past the asked ones, a link with ask=0, or a view routed otherwise than the model's own answer
export async function questionFor(m, own) {
  const q = m.questions;
  if (!q || !state.ask || state.drawn || !own || state.image >= q.images) return null;
  const file = q.files[state.lang] || q.files.en;
  if (!files.has(file)) {
    const got = inflate(file).then((raw) => JSON.parse(new TextDecoder().decode(raw)));
    got.catch(() => files.delete(file));
    files.set(file, got);
  }
  return (await files.get(file))[state.image];
}

// The question in `box`: its choices, an optional reason, Commit and Skip; `done` runs once the
// student has committed or skipped (the view then draws its answer). Answered before: the verdict.
export function ask(box, q, done) {
  const before = answer(q.qid);
  box.hidden = false;
  const head = el("p", { class: "ask-question" });
  head.innerHTML = inline(say("ask_predict", { question: q.text })); // escaped, then the message's bold
  if (before) {
    const verdict = q.verdicts[before.choice ?? ""];
    box.className = before.choice === q.answer ? "ask right" : "ask";
    box.replaceChildren(head, el("p", { class: "ask-verdict" }, say("ask_verdict", { verdict, why: q.why })), el("p", { class: "note" }, keeps() ? say("ask_kept") : say("ask_not_kept")));
    return true;
  }
  box.className = "ask";
  const name = `ask-${q.qid}`;
  const choices = q.keys.map((k, i) =>
    el("label", { class: "ask-choice" }, el("input", { type: "radio", name, value: k }), ` ${q.labels[i]}`),
  );
  const reason = el("input", { type: "text", maxlength: "200", id: "ask-reason", "aria-label": say("ask_reason") });
  const commit = el("button", { type: "button", id: "ask-commit", disabled: "" }, say("ask_commit"));
  const skip = el("button", { type: "button", id: "ask-skip" }, say("ask_skip"));
  const group = el("fieldset", { class: "ask-choices" }, el("legend", {}, say("ask_your_answer")), ...choices);
  group.addEventListener("change", () => commit.removeAttribute("disabled"));
  const finish = (choice) => {
    remember(q.qid, { choice, reason: choice === null ? "" : reason.value.trim().slice(0, 200), at: new Date().toISOString() });
    done();
  };
  commit.addEventListener("click", () => finish(group.querySelector("input:checked")?.value ?? null));
  skip.addEventListener("click", () => finish(null));
  box.replaceChildren(head, group, el("label", { class: "ask-reason" }, `${say("ask_reason")} `, reason), el("div", { class: "row" }, commit, skip));
  return false;
}
