"""The static site's front end, unit by unit: its pure modules (capsviz/site/web/js: the link's
reading and writing, the numbers on the graphs' outputs, the sentences) under node's own test
runner (`node --test`, nothing to install), fed the words `capsviz site` exports into its manifest.
The browser tests (tests/e2e/test_site*_browser.py) run the whole page."""

import json
import re
import shutil
import subprocess

import pytest

from capsviz.site import WEB, words


@pytest.fixture(scope="module")
def node():
    found = shutil.which("node")
    if found is None:
        pytest.skip("node not found: the site's unit tests run under Node.js (apt-get install nodejs)")
    major = int(subprocess.run([found, "--version"], capture_output=True, text=True).stdout.strip().lstrip("v").split(".")[0])
    if major < 20:
        pytest.skip(f"node {major} is too old for the site's unit tests (node --test with ES modules needs 20 or later)")
    return found


def test_the_front_ends_pure_modules_pass_their_unit_tests(node, tmp_path):
    exported = tmp_path / "words.json"
    exported.write_text(json.dumps(words.vocabulary()))
    done = subprocess.run(
        [node, "--test"],
        cwd=WEB,
        env={"PATH": "/usr/bin:/bin", "CAPSVIZ_SITE_WORDS": str(exported), "NODE_OPTIONS": ""},
        capture_output=True,
        text=True,
        timeout=120,
    )
    summary = {
        line.split()[1]: int(line.split()[2])
        for line in done.stdout.splitlines()
        if line.startswith("# ") and len(line.split()) == 3 and line.split()[2].isdigit()
    }
    assert done.returncode == 0 and summary.get("fail") == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert summary.get("pass", 0) >= 15 and summary.get("skipped") == 0, summary


def test_every_message_has_only_named_placeholders():
    for key, message in words.MESSAGES.items():
        assert "{}" not in message and message.count("{") == message.count("}") == len(re.findall(r"\{[A-Za-z_]+\}", message)), key


def test_tour_steps_carry_their_kind_and_iteration():
    assert words.step_kind("iteration12") == ("iteration", 12)
    assert words.step_kind("conv1") == ("conv1", None)  # not cut to "conv"
