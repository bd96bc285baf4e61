"""The rules that decide captions' words, declared once (capsviz.analysis.rules.TABLE): the core's
`decide` and the static site's evaluator (capsviz/site/web/js/rules.js, run by node) give the same
message id and the same placeholders for the same numbers, on both sides of every threshold of
every rule. Skipped where node is missing."""

import itertools
import json
import math
import shutil
import subprocess

import pytest

from capsviz.analysis import rules
from capsviz.site import WEB, words

RUN = """
import { decide } from %s;
import { readFileSync } from "node:fs";
const { table, samples } = JSON.parse(readFileSync(process.argv[2], "utf8"));
const out = samples.map(([name, values]) => { const r = decide(table, name, values); return [r.id, r.placeholders]; });
process.stdout.write(JSON.stringify(out));
"""


def near(x: float) -> list[float]:
    """x and the numbers on either side of it: the nearest floats, and a little farther."""
    return [x, math.nextafter(x, math.inf), math.nextafter(x, -math.inf), x + 1e-3, x - 1e-3]


def samples(rule: rules.Rule) -> list[dict]:
    """Every combination of each input's examples and the numbers on both sides of each threshold it is tested against."""
    values = {k: set(v) for k, v in rule.examples.items()}
    for case in rule.cases:
        for test in case.when:
            rights = rule.examples[test.right] if isinstance(test.right, str) else [test.right]
            for r in rights:
                values[test.left].update(near(test.factor * r / test.divisor))
    names = list(rule.inputs)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*(sorted(values[k]) for k in names))]


def test_every_rule_declares_its_examples_and_a_last_case_without_tests():
    for name, rule in rules.TABLE.items():
        assert set(rule.examples) == set(rule.inputs), name
        assert rule.cases[-1].when == () and all(c.when for c in rule.cases[:-1]), name
        assert set(rule.formats) <= set(rule.inputs) and set(rule.formats.values()) <= set(rules.FORMATS), name


def test_core_and_site_give_the_same_message_on_both_sides_of_every_threshold(tmp_path):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node not found: the site's rule evaluator runs under Node.js (apt-get install nodejs)")
    cases = [(name, v) for name, rule in rules.TABLE.items() for v in samples(rule)]
    data = tmp_path / "samples.json"
    data.write_text(json.dumps({"table": words.rule_table(), "samples": cases}))
    script = tmp_path / "run.mjs"
    script.write_text(RUN % json.dumps((WEB / "js" / "rules.js").as_uri()))
    done = subprocess.run([node, str(script), str(data)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    site = json.loads(done.stdout)
    seen = set()
    for (name, values), (site_id, site_filled) in zip(cases, site, strict=True):
        core_id, core_filled = rules.decide(name, **values)
        assert (site_id, site_filled) == (core_id, core_filled), (name, values)
        seen.add((name, core_id))
    # every case of every rule was reached: each threshold was crossed both ways
    assert seen == {(name, c.id) for name, rule in rules.TABLE.items() for c in rule.cases}
    assert len(cases) > 300


def test_the_functions_read_the_table():
    assert (
        rules.trend(1.0, 1.2) == "rises" and rules.trend(1.0, 1.05) == "stays about level" and rules.trend(0.0, 0.0) == "stays about level"
    )
    assert rules.bounded_trend(0.5, 0.35) == "falls" and rules.bounded_trend(0.5, 0.55) == "stays about level"
    assert rules.near_uniform(0.99, 0.1, 0.1) and not rules.near_uniform(0.99, 0.16, 0.1) and not rules.near_uniform(0.95)
    assert rules.small_span(0.07, 0.14, 0.1) and not rules.small_span(0.06, 0.14, 0.1)
    assert rules.faint(0.19) and not rules.faint(0.2) and rules.small_change(0.09) and not rules.small_change(0.1)
    assert rules.long_votes_move(0.151, 0.1) and not rules.long_votes_move(0.149, 0.1)
    said = rules.case_words("near uniform", evenness=0.99, share=0.2, uniform=0.1)
    assert said == (
        "The couplings are away from uniform: their evenness is 99.0%, more than 95%, but the predicted class gets 0.20 on average, "
        "at least 1.5 times the uniform 0.10."
    )
