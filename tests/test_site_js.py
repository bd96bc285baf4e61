"""The static site's front end, unit by unit: its pure modules (capsviz/site/web/js: the link's
reading and writing, the numbers on the graphs' outputs, the sentences) under node's own test
runner (`node --test`, nothing to install), fed the words `capsviz site` exports into its manifest.
The browser tests (tests/e2e/test_site*_browser.py) run the whole page."""

import json
import re
import shutil
import subprocess

import numpy as np
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


def _threshold(family, lo: float, hi: float) -> float:
    """The coupling p where family(p)'s evenness is the near-uniform rule's threshold (bisection; the
    evenness falls as p grows from lo to hi)."""
    from capsviz.analysis import coupling_entropy, rules

    def ratio(p):
        c = family(p)
        return float(coupling_entropy(c)) / np.log(len(c))

    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if ratio(mid) > rules.NEAR_UNIFORM_ENTROPY else (lo, mid)
    return lo


def playground_rows() -> list[tuple[list[float], str]]:
    """One lower capsule's couplings, on both sides of each of the near-uniform rule's thresholds,
    with the side each should fall on: the evenness threshold with 2 and 3 upper capsules, the
    share threshold (1.5 times uniform: with one capsule's couplings the evenness is then already
    below its own threshold, so both sides are "not uniform"), ties and zeros."""
    from capsviz.analysis import rules

    two = lambda p: np.array([p, 1 - p])  # noqa: E731
    three = lambda p: np.array([p, (1 - p) / 2, (1 - p) / 2])  # noqa: E731
    rows = []
    for family, lo, hi in ((two, 0.5, 0.99), (three, 1 / 3, 0.99)):
        p = _threshold(family, lo, hi)
        rows += [(family(p - 1e-6), "uniform"), (family(p + 1e-6), "1"), (family(p + 1e-6)[::-1], str(len(family(p))))]
    for J in (2, 3):
        share = rules.NEAR_UNIFORM_SHARE / J
        for p in (share - 1e-6, share + 1e-6):
            rows.append((np.array([(1 - p) / (J - 1)] * (J - 1) + [p]), str(J)))
    rows += [(np.array([0.45, 0.45, 0.1]), "1"), (np.array([0.1, 0.45, 0.45]), "2"), (np.array([1.0, 0.0, 0.0]), "1")]
    rows += [(np.array([0.5, 0.5]), "uniform"), (np.full(3, 1 / 3), "uniform")]
    return [(c.tolist(), side) for c, side in rows]


def playground_cases() -> list[dict]:
    """The app's playground question (capsviz.analysis.questions.routed_split) on toy states, in each
    language, as the site shows a question (capsviz.site.quiz.said), with the words the page fills:
    web/tests/toyask.test.js makes the page's question from the same couplings and must say the same.
    The states: rows on both sides of the near-uniform rule's thresholds (playground_rows, their side
    checked here against the app's answer) and the app's own toys on its presets."""
    from types import SimpleNamespace

    from capsviz.analysis.playground import DYNAMIC_PRESETS, attention_toy, dynamic_toy
    from capsviz.analysis.questions import routed_split
    from capsviz.i18n import LANGUAGES, speaking
    from capsviz.site import quiz

    states = []  # (toy, lower capsule, T, self-attention)
    for k, (row, side) in enumerate(playground_rows()):
        lower, T = k % 6, 1 + k % 4
        c = np.zeros((T, lower + 1, len(row)))
        c[-1, lower] = row
        toy = SimpleNamespace(c=c, u_hat=np.zeros((lower + 1, len(row), 2)))
        assert routed_split(toy, lower, ("dynamic",)).answer == side, (row, side)
        states.append((toy, lower, T, False))
    for points in DYNAMIC_PRESETS.values():
        for J in (2, 3):
            states += [(dynamic_toy(points[:, :J], 3), k, 3, False) for k in range(len(points))]
            states.append((attention_toy(points[:, :J]), J, 1, True))
    answers = {routed_split(toy, k, ("x",), attention).answer for toy, k, _, attention in states}
    assert answers == {"1", "2", "3", "uniform"}, answers
    cases = []
    for lang in LANGUAGES:
        with speaking(lang):
            v = words.vocabulary()
            asked = [
                {
                    "c": toy.c[-1, k].tolist(),
                    "k": k,
                    "T": T,
                    "attention": attention,
                    "want": quiz.said(routed_split(toy, k, ("x",), attention)),
                }
                for toy, k, T, attention in states
            ]
            cases.append({"lang": lang, "messages": v["messages"], "counted": v["counted"], "rules": v["rules"], "states": asked})
    return cases


def filled_cases() -> list[dict]:
    """Every message of the site in each language with the app's filling of it (capsviz.i18n.t): a
    placeholder with a format gets a number, one without alternately a digit and a Chinese word (the
    catalogs' spaces beside a placeholder go where the value is Chinese or Japanese):
    web/tests/chart.test.js draws each as a chart's title, which must read the same."""
    from capsviz.i18n import LANGUAGES, speaking, t

    every = {**words.MESSAGES, **words.PAGE, **words.CHAPTER}
    cases = []
    for lang in LANGUAGES:
        with speaking(lang):
            for key, message in every.items():
                formatted = set(re.findall(r"\{([A-Za-z_][A-Za-z0-9_]*):", message))
                names = sorted(words.placeholders(message))
                values = {n: 0.8712 if n in formatted else ("7" if k % 2 else "胶囊") for k, n in enumerate(names)}
                cases.append({"lang": lang, "key": key, "template": t(message), "values": values, "want": t(message, **values)})
    return cases


def test_the_front_ends_pure_modules_pass_their_unit_tests(node, tmp_path):
    exported = tmp_path / "words.json"
    exported.write_text(json.dumps(words.vocabulary()))
    chapter = tmp_path / "why.json"
    chapter.write_text(json.dumps(chapter_cases(), ensure_ascii=False))
    playground = tmp_path / "playground.json"
    playground.write_text(json.dumps(playground_cases(), ensure_ascii=False))
    tour = tmp_path / "tour.json"
    tour.write_text(json.dumps(tour_cases(), ensure_ascii=False))
    filled = tmp_path / "filled.json"
    filled.write_text(json.dumps(filled_cases(), ensure_ascii=False))
    done = subprocess.run(
        [node, "--test"],
        cwd=WEB,
        env={
            "PATH": "/usr/bin:/bin",
            "CAPSVIZ_SITE_WORDS": str(exported),
            "CAPSVIZ_SITE_WHY": str(chapter),
            "CAPSVIZ_SITE_PLAYGROUND": str(playground),
            "CAPSVIZ_SITE_TOUR": str(tour),
            "CAPSVIZ_SITE_FILLED": str(filled),
            "NODE_OPTIONS": "",
        },
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


def tour_cases() -> list[dict]:
    """The app's dynamic-routing tour (capsviz.families.capsnet.tour) on real traces of a shipped
    CapsNet, each step's sentences that depend only on the browser's numbers, in each language, with
    the state the browser computes (u, u_hat, the couplings and v of every iteration, as
    runtime.computeFor lays them out): web/tests/said.test.js writes the same sentences from it."""
    import torch

    from capsviz.checkpoint import load_checkpoint
    from capsviz.families.capsnet.tour import capsnet_tour, capsnet_walk
    from capsviz.glossary import class_words
    from capsviz.i18n import LANGUAGES, speaking
    from capsviz.paths import shipped_checkpoints

    model, meta = load_checkpoint(shipped_checkpoints() / "capsnet-small-mnist.safetensors")
    cfg = model.config
    names = [str(c) for c in meta.class_names]
    one = np.zeros((28, 28), np.float32)
    one[6:22, 12:15] = 1  # a made-up "1", read with its label
    seven = np.zeros((28, 28), np.float32)  # a made-up "7", read as a drawing (no label)
    seven[5:8, 7:21] = 1
    for k in range(15):
        seven[8 + k, 19 - k // 2 : 22 - k // 2] = 1
    drawn = [one, seven]
    states, cases = [], []
    for n, image in enumerate(drawn):
        with torch.no_grad():
            x = torch.from_numpy(image)[None, None]
            u = model.primary_capsules(x)[0]
            channels = int(model.features(x).shape[-1])  # Conv1's maps, which the encoder graph returns
            u_hat = model.digits(u[None])[0]
            r = model.route(u_hat[None], routing="dynamic", iterations=cfg.routing_iterations, record=True)
        states.append(
            {
                "I": u_hat.shape[1],
                "J": u_hat.shape[0],
                "D": u_hat.shape[2],
                "u": u.flatten().tolist(),
                "uHat": u_hat.flatten().tolist(),
                "c": r.c[:, 0].flatten().tolist(),
                "v": r.v_trace[:, 0].flatten().tolist(),
                "rule": "dynamic",
                "channels": channels,
                "T": cfg.routing_iterations,
                "right": None if n else 1,  # an image whose label the page knows, or a drawing
            }
        )
    for lang in LANGUAGES:
        with speaking(lang):
            said = words.vocabulary()["tour_said"]
            want = []
            for image, state in zip(drawn, states, strict=True):
                trace = capsnet_tour(model, image)
                truth = names[state["right"]] if state["right"] is not None else ""
                walked = capsnet_walk(trace, names, class_words(meta), "capsnet-small-mnist", truth, "", [])
                steps = {s.key: s for s in walked}
                want.append(
                    {
                        "primary": [steps["primary"].measured, steps["primary"].warn],
                        "predictions": steps["predictions"].measured,
                        "iterations": [
                            [list(steps[f"iteration{k + 1}"].text), steps[f"iteration{k + 1}"].measured] for k in range(trace.iterations)
                        ],
                        "lengths": steps["lengths"].measured,
                        "text": {k: list(steps[k].text) for k in ("input", "conv1", "primary", "predictions", "lengths", "reconstruction")},
                    }
                )
            cw = class_words(meta)
            cases.append(
                {
                    "lang": lang,
                    "said": said,
                    "want": want,
                    "words": {"capsule": cw.capsule, "thing": cw.thing, "shown": cw.shown, "digits": cw.digits},
                }
            )
    return {
        "model": "capsnet-small-mnist",
        "names": names,
        "grid": cfg.primary_grid,
        "types": cfg.primary_types,
        "states": states,
        "cases": cases,
        "efficient": efficient_cases(drawn),
        "em": em_cases(drawn),
    }


def efficient_cases(drawn: list[np.ndarray]) -> dict:
    """The Efficient-CapsNet tour (capsviz.families.efficient_capsnet.tour) on the same images: its
    sentences that depend only on the browser's numbers (u, u_hat, the couplings and v of its one
    pass of self-attention, as runtime.computeFor lays them out), in each language."""
    import torch

    from capsviz.checkpoint import load_checkpoint
    from capsviz.families.efficient_capsnet.tour import efficient_tour, walk
    from capsviz.glossary import class_words
    from capsviz.i18n import LANGUAGES, speaking
    from capsviz.paths import shipped_checkpoints

    model, meta = load_checkpoint(shipped_checkpoints() / "efficient-capsnet-mnist.safetensors")
    names = [str(c) for c in meta.class_names]
    states = []
    for n, image in enumerate(drawn):
        with torch.no_grad():
            x = torch.from_numpy(image)[None, None]
            u_hat = model.predictions(x)[0]  # (J, I, D)
            r = model.route(u_hat[None], record=True)
            states.append(
                {
                    "I": u_hat.shape[1],
                    "J": u_hat.shape[0],
                    "D": u_hat.shape[2],
                    "u": model.primary_capsules(x)[0].flatten().tolist(),
                    "uHat": u_hat.flatten().tolist(),
                    "c": r.c[0, 0].flatten().tolist(),
                    "v": r.v[0].flatten().tolist(),
                    "right": None if n else 1,
                }
            )
    cases = []
    for lang in LANGUAGES:
        with speaking(lang):
            want = []
            for image, state in zip(drawn, states, strict=True):
                truth = names[state["right"]] if state["right"] is not None else ""
                steps = {
                    s.key: s for s in walk(efficient_tour(model, image), names, class_words(meta), "efficient-capsnet-mnist", truth, "", [])
                }
                want.append(
                    {
                        k: [list(steps[k].text), steps[k].measured]
                        for k in ("primary", "predictions", "routing", "lengths", "reconstruction")
                    }
                )
            cases.append({"lang": lang, "said": words.vocabulary()["tour_said"], "want": want, "shown": class_words(meta).shown})
    return {"names": names, "states": states, "cases": cases}


def em_cases(drawn: list[np.ndarray]) -> dict:
    """The matrix-capsule tour (capsviz.families.matrix_capsnet.tour) on the same images: its
    sentences that depend only on the browser's numbers (the lower activations and every EM
    iteration's R and a, as runtime.computeEM lays them out), in each language."""
    from capsviz.analysis.steps import two
    from capsviz.checkpoint import load_checkpoint
    from capsviz.families.matrix_capsnet.tour import MESSAGES, matrix_tour, matrix_walk
    from capsviz.i18n import LANGUAGES, speaking, t
    from capsviz.paths import shipped_checkpoints

    model, meta = load_checkpoint(shipped_checkpoints() / "matrix-small-mnist.safetensors")
    names = [str(c) for c in meta.class_names]
    traces = [matrix_tour(model, image) for image in drawn]
    states = [
        {
            "T": tr.iterations,
            "I": len(tr.a_in),
            "J": tr.a.shape[1],
            "aIn": tr.a_in.tolist(),
            "R": tr.R.flatten().tolist(),
            "a": tr.a.flatten().tolist(),
            "right": None if n else 1,  # an image whose label the page knows, or a drawing
        }
        for n, tr in enumerate(traces)
    ]
    cases = []
    for lang in LANGUAGES:
        with speaking(lang):
            want = []
            for tr, state in zip(traces, states, strict=True):
                truth = "" if state["right"] is None else names[state["right"]]
                steps = {s.key: s for s in matrix_walk(tr, names, "matrix-small-mnist", truth, "")}
                W, R, a = tr.winner, tr.runner_up, tr.a[-1]
                # a drawing's answer: the walk's message without the label, on the same trace (the walk always has a label)
                unlabelled = t(MESSAGES["em_answer_unlabelled"], w=names[W], a_w=two(a[W]), r=names[R], a_r=two(a[R]))
                want.append(
                    {
                        "input": list(steps["input"].text),
                        "iterations": [steps[f"iteration{k + 1}"].measured for k in range(tr.iterations)],
                        "activations": unlabelled if state["right"] is None else steps["activations"].text[0],
                    }
                )
            cases.append({"lang": lang, "said": words.vocabulary()["tour_said"], "want": want})
    return {"model": "matrix-small-mnist", "names": names, "states": states, "cases": cases}


def test_the_tours_message_tables_name_each_message_once():
    from capsviz.site import said

    assert len(said.TOUR_MESSAGES) == sum(len(table) for table in said.TABLES)
