import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { test } from "node:test";
import { fill, label, quoted, say, sentences, useMessages } from "../js/words.js";
import { NO_WORDS, manifest } from "./fixture.js";

test("fill replaces named placeholders and leaves unknown ones as written", () => {
  assert.equal(fill("{a} and {b_2}", { a: 1, b_2: "x" }), "1 and x");
  assert.equal(fill("{a} {missing}", { a: 0 }), "0 {missing}");
});

test("fill writes {x:.2f} and {v:+.0f} as Python's format writes them", () => {
  assert.equal(fill("{l0:.2f} to {angle:.1f}", { l0: 0.956, angle: 12.34 }), "0.96 to 12.3");
  assert.equal(fill("{v:+.0f} px, {w:+.0f} px", { v: 3, w: -20 }), "+3 px, -20 px");
  assert.equal(fill("{x:.2f}", {}), "{x:.2f}"); // no value: left as written
});

test("quoted cuts a long value, label drops the file's ending", () => {
  assert.equal(quoted("x".repeat(30)), `${"x".repeat(24)}...`);
  assert.equal(label("capsnet-mnist.safetensors"), "capsnet-mnist");
});

test("before the manifest, the start's failure can still be said", () => {
  useMessages({});
  assert.equal(say("start_failed", { what: say("what_runtime"), cause: say("cause_offline"), todo: say("todo_offline") }).slice(0, 27), "The site could not open its");
  assert.throws(() => say("no such message"));
});

// the keys of an object literal's text: "a: x, b, c: f(1, 2)" -> [a, b, c]
function keysOf(text) {
  return [...(text || "").matchAll(/(?:^|,)\s*([a-z_]+)\s*(?=:|,|$)/gi)].map((m) => m[1]);
}

// every say("...") in the front end, with the placeholders it fills
function uses() {
  const found = [];
  const files = ["site.js", ...readdirSync(new URL("../js", import.meta.url), { recursive: true }).filter((f) => f.endsWith(".js")).map((f) => `js/${f}`)];
  for (const f of files) {
    const text = readFileSync(new URL(`../${f}`, import.meta.url), "utf8");
    for (const m of text.matchAll(/say\("([a-z_]+)"(?:, \{([^}]*)\})?\)/g)) {
      found.push({ file: f, id: m[1], keys: keysOf(m[2]) });
    }
    for (const m of text.matchAll(/id: "([a-z_]+)", values: \{([^}]*)\}/g)) {
      found.push({ file: f, id: m[1], keys: keysOf(m[2]) });
    }
  }
  return found;
}

test("every message the front end says is in the manifest with exactly the placeholders it fills", { skip: NO_WORDS }, () => {
  const messages = manifest().messages;
  const said = uses();
  assert.ok(said.length > 20, said.length);
  for (const { file, id, keys } of said) {
    assert.ok(id in messages, `${file}: ${id} is not among the manifest's messages`);
    const wanted = [...messages[id].matchAll(/\{([a-z_][a-z0-9_]*)(?::\+?\.[0-9]f)?\}/gi)].map((m) => m[1]); // {score:.2f} fills score
    assert.deepEqual([...new Set(keys)].sort(), [...new Set(wanted)].sort(), `${file}: ${id}`);
  }
});

test("every word index.html marks (data-w, data-w-label) is among the manifest's messages", { skip: NO_WORDS }, () => {
  const messages = manifest().messages;
  const html = readFileSync(new URL("../index.html", import.meta.url), "utf8");
  const marked = [...html.matchAll(/data-w(?:-label)?="([a-z_0-9]+)"/g)].map((m) => m[1]);
  assert.ok(marked.length > 30, marked.length);
  for (const id of marked) assert.ok(id in messages, `index.html: ${id} is not among the manifest's messages`);
});

test("sentences follow one another as the language writes them", () => {
  useMessages({}, "ja");
  assert.equal(sentences("一つ。", "", "二つ。"), "一つ。二つ。");
  useMessages({}, "zh-Hans");
  assert.equal(sentences("一。", "二。"), "一。二。");
  useMessages({});
  assert.equal(sentences("One.", null, "Two."), "One. Two.");
});

test("fill joins a Chinese or Japanese value to the text and keeps a Latin one apart, as the app does", () => {
  assert.equal(fill("这 {n} 个 {x_name} 取值", { n: 9, x_name: "强度" }), "这 9 个强度取值");
  assert.equal(fill("这 {n} 个 {x_name} 取值", { n: 9, x_name: "epsilon" }), "这 9 个 epsilon 取值");
  assert.equal(fill("在 {near} 上", { near: "6 个模型中的 5 个" }), "在 6 个模型中的 5 个上");
  assert.equal(fill("{a} and {b}", { a: "强", b: "度" }), "强 and 度");
});
