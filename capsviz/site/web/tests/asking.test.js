import assert from "node:assert/strict";
import { test } from "node:test";
import { answer, keeps, remember } from "../js/answers.js";

function storage() {
  const kept = new Map();
  return { getItem: (k) => (kept.has(k) ? kept.get(k) : null), setItem: (k, v) => kept.set(k, String(v)), kept };
}

test("answers stay in the browser's storage, by question", () => {
  globalThis.localStorage = storage();
  assert.equal(answer("longest:abc"), null);
  remember("longest:abc", { choice: "7", reason: "it looks like a 7", at: "now" });
  remember("pair:def", { choice: null, reason: "", at: "now" }); // a skip
  assert.equal(answer("longest:abc").choice, "7");
  assert.equal(answer("pair:def").choice, null);
  assert.deepEqual(Object.keys(JSON.parse(localStorage.kept.get("capsviz-answers"))), ["longest:abc", "pair:def"]);
  assert.ok(keeps());
});

test("a browser that refuses storage keeps the answers for the page's life, and says so", () => {
  globalThis.localStorage = {
    getItem() {
      throw new Error("SecurityError");
    },
    setItem() {
      throw new Error("SecurityError");
    },
  };
  assert.equal(keeps(), false);
  remember("longest:xyz", { choice: "3", reason: "", at: "now" });
  assert.equal(answer("longest:xyz").choice, "3");
  delete globalThis.localStorage;
});
