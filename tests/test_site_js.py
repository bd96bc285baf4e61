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


def chapter_cases() -> list[dict]:
    """The app's sentence about one digit turned (capsviz.analysis.why.one_image_words) in each
    language, with the numbers it was made from: the page fills the same message with them
    (web/tests/why.test.js) and must read the same."""
    import numpy as np
    import torch

    from capsviz.analysis import rules, why
    from capsviz.checkpoint import load_checkpoint
    from capsviz.i18n import LANGUAGES, speaking, t
    from capsviz.paths import shipped_checkpoints

    caps, meta = load_checkpoint(shipped_checkpoints() / "capsnet-small-mnist.safetensors")
    cnn, _ = load_checkpoint(shipped_checkpoints() / "cnn-small-mnist.safetensors")
    image = np.zeros((28, 28), np.float32)
    image[6:22, 12:15] = 1  # a made-up "1"
    with torch.no_grad():
        view = why.one_image(caps, cnn, image, "rotate")
    names = [str(c) for c in meta.class_names]
    plain = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in view.items() if k not in ("inputs", "reconstructions")}
    cases = []
    for lang in LANGUAGES:
        with speaking(lang):
            message = words.vocabulary()["messages"]
            cases.append(
                {
                    "lang": lang,
                    "message": message["why_one_image"],
                    "view": plain,
                    "names": names,
                    "amount": -20.0,
                    "step": rules.DIM_STEP,
                    "want": why.one_image_words(view, names, -20.0),
                    "cnn_message": message["why_cnn_says"],
                    "cnn_want": t("CNN: {name} ({score:.2f})", name="7", score=0.98765),
                }
            )
    return cases


def test_the_front_ends_pure_modules_pass_their_unit_tests(node, tmp_path):
    exported = tmp_path / "words.json"
    exported.write_text(json.dumps(words.vocabulary()))
    chapter = tmp_path / "why.json"
    chapter.write_text(json.dumps(chapter_cases(), ensure_ascii=False))
    done = subprocess.run(
        [node, "--test"],
        cwd=WEB,
        env={"PATH": "/usr/bin:/bin", "CAPSVIZ_SITE_WORDS": str(exported), "CAPSVIZ_SITE_WHY": str(chapter), "NODE_OPTIONS": ""},
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
