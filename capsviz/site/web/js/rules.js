// The rules that decide a caption's words, evaluated from the table `capsviz site` exports
// (capsviz/analysis/rules.py TABLE, the manifest's "rules"): the same cases, tests and placeholders
// as the app's, so a number gets the same message on both sides of every threshold
// (tests/test_site_rules.py feeds both the same numbers). Pure: no page.

const OPS = { "<": (a, b) => a < b, "<=": (a, b) => a <= b, ">": (a, b) => a > b, ">=": (a, b) => a >= b };
// how a placeholder is written, as rules.FORMATS writes it
const FORMATS = { pct1: (x) => `${(100 * x).toFixed(1)}%`, f2: (x) => x.toFixed(2), f3: (x) => x.toFixed(3) };

function holds(test, values) {
  const right = typeof test.right === "string" ? values[test.right] : test.right;
  return OPS[test.op](values[test.left], (test.factor * right) / test.divisor);
}

// rule `name` of `table` on `values`: {id, words, placeholders} of the first case whose tests all hold
export function decide(table, name, values) {
  const rule = table[name];
  if (!rule) throw new Error(`no rule ${name}`);
  for (const input of rule.inputs) if (typeof values[input] !== "number") throw new Error(`rule ${name} needs ${input}`);
  const chosen = rule.cases.find((c) => c.when.every((test) => holds(test, values)));
  const placeholders = { ...Object.fromEntries(Object.entries(rule.formats).map(([k, f]) => [k, FORMATS[f](values[k])])), ...rule.constants };
  return { id: chosen.id, words: chosen.words, placeholders };
}
