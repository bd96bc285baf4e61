import assert from "node:assert/strict";
import { test } from "node:test";
import { decide } from "../js/rules.js";
import { NO_WORDS, manifest } from "./fixture.js";

// tests/test_site_rules.py feeds this evaluator and the core's the same numbers at every threshold; here, by hand
test("the first case whose tests all hold decides, with the rule's placeholders", { skip: NO_WORDS }, () => {
  const rules = manifest().rules;
  const near = decide(rules, "near uniform", { evenness: 0.99, share: 0.12, uniform: 0.1 });
  assert.equal(near.id, "couplings_near_uniform");
  assert.deepEqual(near.placeholders, { evenness: "99.0%", share: "0.12", uniform: "0.10", evenness_limit: "95%", factor: "1.5" });
  assert.equal(decide(rules, "near uniform", { evenness: 0.95, share: 0.12, uniform: 0.1 }).id, "couplings_away_evenness");
  assert.equal(decide(rules, "near uniform", { evenness: 0.99, share: 0.2, uniform: 0.1 }).id, "couplings_away_share");
  assert.equal(decide(rules, "rises / falls, 0 to 1", { change: 0.11 }).words, "rises");
  assert.throws(() => decide(rules, "near uniform", { evenness: 0.99 }), /needs share/);
});
