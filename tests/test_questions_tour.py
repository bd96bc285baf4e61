"""The guided tour's questions (issue 54, items 1 and 2; issue 50, item 1): before each step that
shows what the model did, a question whose answer key is what that step's figure then shows, for
every shipped model, the "Why capsules" steps first; the student's standing at the end; and the
page, as a student meets it: the step waits for the answer, the answer goes to the class's store,
the last step says which were right and leads back to each missed one."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import test_app
from streamlit.testing.v1 import AppTest
from test_tour_steps import CONSTANTS, NUMBER, SHIPPED, matches, numbers_in
from test_why import numbers_of

import pages.classroom
from capsviz import store
from capsviz.analysis import lab, rules, tour_questions, why, why_steps
from capsviz.analysis.questions import MOST_CHOICES, UNIFORM, Words, split_of
from capsviz.analysis.steps import MOST, SATURATED
from capsviz.analysis.tour import tour_of, walk
from capsviz.checkpoint import list_checkpoints, load_checkpoint
from capsviz.data import load_split
from capsviz.glossary import class_words
from capsviz.i18n import speaking, t
from capsviz.registry import ROUTINGS
from capsviz.text import plain
from capsviz.viz import why as figures

APP = test_app.APP
app, router_mode = test_app.app, test_app.router_mode
FOLDER = SHIPPED[0].parent
TOURED = [p for p in SHIPPED if tour_of(load_checkpoint(p)[1].config) is not None]


def tour_steps(path: Path, index: int = 0):
    """Every step of the tour of the shipped model in `path` on test image `index`, the chapter's
    first, as the page builds them (the chapter's sweeps as stored beside the shipped models)."""
    model, meta = load_checkpoint(path)
    model.eval()
    data = load_split(meta.image_dataset, "test")
    S = meta.config.in_size
    pad = (S - 28) // 2
    image = np.pad(data.images[index].numpy().astype(np.float32) / 255, ((pad, S - 28 - pad), (pad, S - 28 - pad)))
    names = [str(n) for n in meta.class_names]
    truth = str(names[int(data.labels[index])])
    chapter = why_steps.chapter_for(meta, list_checkpoints(FOLDER), path.stem)
    sweeps = {k: why_steps.stored_sweep(k, path, data, chapter.cnn_path) for k in chapter.sweeps}
    if chapter.kind == "vector":
        cnn = load_checkpoint(chapter.cnn_path)[0].eval()
        first = why_steps.vector_chapter(model, cnn, image, names, path.stem, sweeps["invariance"], sweeps["parts"])
    elif chapter.kind == "matrix":
        first = why_steps.matrix_chapter(model, image, path.stem, sweeps["viewpoint"])
    else:
        first = why_steps.unmeasured_steps(chapter, image)
    have = lab.stored_rows([(path, meta)], ROUTINGS) if lab.fits(meta.config) else {}
    rows = [have[path.stem, r] for r in ROUTINGS if (path.stem, r) in have]
    trace = tour_of(meta.config).follow(model, image)
    return chapter, sweeps, first + walk(trace, names, class_words(meta), path.stem, truth, "the input", rows, meta.config), names, truth


def key_of(q, words: str) -> str:
    """The key of the choice labelled `words` (English)."""
    return next(k for k in q.keys if q.label(k) == words)


def drawn(spec: dict) -> list[float]:
    return numbers_of(spec)


# -- every shipped model: the answer key is what the step then shows ----------------------------


@pytest.mark.parametrize("path", TOURED, ids=[p.stem for p in TOURED])
def test_every_answer_key_is_what_its_step_then_shows_for_every_shipped_model(real_data, path):
    chapter, sweeps, steps, names, truth = tour_steps(path)
    asked = [s for s in steps if s.question is not None]
    assert asked, path.stem
    for step in asked:
        q, d = step.question, step.data
        assert q.page == "tour" and q.answer in q.keys and len(set(q.keys)) == len(q.keys) <= MOST_CHOICES, step.key
        assert len(q.keys) >= 2
        # the reveal's sentence quotes the step's own numbers
        why_said = str(q.why)
        values = numbers_in(d) + CONSTANTS
        for token in NUMBER.findall(why_said):
            assert matches(token, values), (path.stem, step.key, token, why_said)
        k = step.key
        if k == "lengths":
            assert q.answer == str(int(np.argmax(d["values"]))) == str(d["highlight"])
        elif k == "activations":
            assert q.answer == str(int(np.argmax(d["values"]))) == str(d["highlight"])
        elif k == "primary" and step.figure == "arrows":  # a CapsNet's: the share the warning reads
            assert q.answer == ("most" if d["long"] > MOST else "few")
            assert (q.answer == "most") == step.warn
        elif k == "primary" and step.figure == "bars":  # Efficient-CapsNet's 16 bars
            assert q.answer == ("most" if (d["values"] > SATURATED).mean() > MOST else "few")
        elif k == "primary":  # matrix capsules: the pose table
            assert q.answer == ("beyond" if np.abs(d["pose"]).max() > 1 else "inside")
            assert ("so this is not one" in step.measured) == (q.answer == "beyond")
        elif k == "predictions" and "highlight_row" in d:  # a CapsNet's table: a column per primary capsule
            assert q.answer == str(int(np.argmax(d["values"][:, 0])))
            assert names[d["highlight_row"]] in [q.label(x) for x in q.keys]  # routing's winner, the guess to beat
        elif k == "predictions":  # Efficient-CapsNet's: a row per primary capsule, the winner's column in red
            assert q.answer == str(int(np.argmax(d["values"][:, d["highlight"]])))
            assert f"capsule {int(q.answer) + 1}'s" in step.measured
        elif k == "iteration1" and step.figure == "routing":
            assert q.answer == UNIFORM and np.allclose(d["c"], d["uniform"])
        elif k.startswith("iteration") and step.figure == "routing":
            near = rules.near_uniform(d["entropy_mean"], d["mean"], d["uniform"])
            assert q.answer == ("near" if near else "away") and f" are {'near' if near else 'away from'} uniform:" in step.measured
        elif k == "routing":  # Efficient-CapsNet's one pass
            near = rules.near_uniform(d["entropy_mean"], d["share"], d["uniform"])
            assert q.answer == ("near" if near else "away") and f" are {'near' if near else 'away from'} uniform:" in step.measured
        elif k.startswith("iteration"):  # EM: the first row of the table, the most active lower capsule
            row, top = d["R"][0], str(int(np.argmax(d["R"][0])))
            if split_of(row) == UNIFORM:
                assert q.answer == UNIFORM
            else:
                assert q.answer == (top if top in q.keys else tour_questions.OTHER_CLASS)
        elif k == "lab":
            said = " ".join(step.text)
            verdict = {"same": "no better or worse", "worse": "points worse", "better": "points better"}[q.answer]
            routing = str(q.text).split(" test images with ")[1].split(" instead of")[0]
            sentence = next(s for s in step.text if s.startswith(f"Run with {routing}, the model misclassifies"))
            assert verdict in sentence, (sentence, q.answer)
            assert routing in said
        elif k == "why_invariance":
            view, at = d["view"], d["view"]["values"].index(d["amount"])
            spec = figures.dimensions.spec(view, d["amount"])
            shown = np.array([tr["y"] for tr in spec["data"]])  # the 16 numbers, unchanged and moved
            change = 100 * np.linalg.norm(shown[1] - shown[0]) / np.linalg.norm(shown[0])
            assert d["caps_change"][at] == pytest.approx(change, rel=1e-5)
            verdict = rules.trend(change, view["cnn_features"][at])
            assert q.answer == {"rises": "cnn", "falls": "caps"}.get(verdict, "same")
        elif k == "why_pose":
            view, at = d["view"], d["view"]["values"].index(d["amount"])
            zero = view["values"].index(0.0)
            spec = figures.this_digit.spec(view, "shift", d["amount"])
            assert view["lengths"][zero] in drawn(spec) and view["lengths"][at] in drawn(spec)  # the capsule's length line
            if q.answer == "still":
                assert rules.nearly_invariant(d["caps_change"][at] / 100)
            else:
                level = rules.bounded_trend(view["lengths"][zero], view["lengths"][at])
                assert q.answer == {"falls": "falls", "rises": "rises"}.get(level, "turns")
        elif k == "why_parts":
            bars = figures.parts_right.spec(d["sweep"])
            cnn, caps = bars["data"][0]["y"][1], bars["data"][1]["y"][1]  # the halves swapped, as the chart draws them
            verdict = why.parts_words(d["sweep"], "halves")[0]
            expected = "same" if "within chance" in verdict else "cnn" if "more sensitive" in verdict else "caps"
            assert q.answer == expected and (expected != "cnn" or cnn > caps) and (expected != "caps" or caps > cnn)
        elif k == "why_viewpoint":
            said = why.viewpoint_words(d["sweep"], "shift", d["amount"])[0]
            assert q.answer == (
                "together" if "The votes move together" in said else "scatter" if "do not move together" in said else "still"
            )
            at = d["sweep"]["shift_values"].index(d["amount"])
            assert d["sweep"]["shift_mean_move"][at] in drawn(figures.votes_move.spec(d["sweep"], "shift", d["amount"]))
        elif k == "why_coordinates":
            said = why.viewpoint_words(d["sweep"], "shift", d["amount"])[1]
            assert q.answer == ("same" if "little difference" in said else "more" if "follows the position more" in said else "less")
        else:
            raise AssertionError(f"a question no test checks: {k}")
    # which steps ask: every step that shows a result, the chapter's too where it is measured
    keys = {s.key for s in asked}
    if chapter.kind == "vector":
        assert {"why_invariance", "why_parts", "why_pose", "lengths", "predictions", "primary"} <= keys
    if chapter.kind == "matrix":
        assert {"why_viewpoint", "primary", "activations"} <= keys
    assert "input" not in keys


@pytest.mark.parametrize("path", [p for p in TOURED if p.stem in ("capsnet-mnist", "matrix-small-mnist")], ids=lambda p: p.stem)
def test_the_same_image_asks_the_same_questions_and_another_image_new_ones(real_data, path):
    first = [s.question.qid for s in tour_steps(path, 0)[2] if s.question]
    again = [s.question.qid for s in tour_steps(path, 0)[2] if s.question]
    other = [s.question.qid for s in tour_steps(path, 1)[2] if s.question]
    assert first == again and len(set(first)) == len(first)
    over_the_test_set = ("tour-parts:", "tour-lab:", "tour-votes:", "tour-coordinates:")  # one question whatever the image
    shared = set(first) & set(other)
    assert shared == {q for q in first if q.startswith(over_the_test_set)} and len(shared) < len(first)


def test_the_chapter_for_every_shipped_model_or_why_not():
    listing = list_checkpoints(FOLDER)
    said = {}
    for path, meta in listing:
        if tour_of(meta.config) is None:
            continue
        said[path.stem] = why_steps.chapter_for(meta, listing, path.stem)
    assert said["capsnet-mnist"].kind == "vector" and said["capsnet-mnist"].cnn_path.stem == "cnn-small-mnist"
    assert said["efficient-capsnet-mnist"].kind == "vector" and said["matrix-small-mnist"].kind == "matrix"
    assert said["capsnet-fashion-mnist"].kind == "" and "no CNN trained on fashion-mnist" in said["capsnet-fashion-mnist"].reason
    assert said["capsnet-multimnist"].kind == "" and "reads 36x36 images" in said["capsnet-multimnist"].reason
    image = np.zeros((36, 36), np.float32)
    (step,) = why_steps.unmeasured_steps(said["capsnet-multimnist"], image)
    assert step.figure == "image" and step.data["images"][0] is image  # the step shows what the tour follows next
    assert step.question is None and step.link[0] == "pages/why.py" and said["capsnet-multimnist"].reason in step.text[0]


def test_a_stored_sweep_is_read_and_a_missing_one_is_never_run(real_data, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    data = load_split("mnist", "test")
    cnn = FOLDER / "cnn-small-mnist.safetensors"
    ran = []
    with monkeypatch.context() as m:
        m.setattr(why, "invariance_sweep", lambda *a, **k: ran.append(a) or {"x": 1.0})
        stored = why_steps.stored_sweep("invariance", FOLDER / "capsnet-mnist.safetensors", data, cnn)
    assert stored is not None and stored["images"] == 1000 and not ran  # shipped beside the model: read, not run
    test_app.tiny_checkpoints(tmp_path)  # models the chapter never measured
    assert why_steps.stored_sweep("invariance", tmp_path / "tiny-capsnet.safetensors", data, cnn) is None
    assert why_steps.stored_sweep("parts", tmp_path / "tiny-capsnet.safetensors", data, cnn) is None
    assert why_steps.stored_sweep("viewpoint", tmp_path / "tiny-matrix.safetensors", data) is None
    assert not list(tmp_path.rglob("*.json"))  # nothing measured, nothing written


# -- the questions on both sides of their rules ------------------------------------------------


IMAGE = np.zeros((28, 28), np.float32)


@pytest.mark.parametrize(
    "cnn, caps, answer",
    [(118.2, 30.0, "cnn"), (20.0, 60.0, "caps"), (31.0, 30.0, "same"), (10.0, 9.5, "same")],
)
def test_which_changes_more_by_the_tenth_rule(cnn, caps, answer):
    q = tour_questions.changes_more("m", IMAGE, cnn, caps, 4)
    assert q.answer == answer and f"{cnn:.1f}%" in str(q.why) and f"{caps:.1f}%" in str(q.why)


@pytest.mark.parametrize(
    "before, after, change, answer",
    [(0.93, 0.90, 30.0, "turns"), (0.93, 0.79, 30.0, "falls"), (0.5, 0.7, 30.0, "rises"), (0.93, 0.79, 5.0, "still")],
)
def test_presence_or_pose_decides_as_the_chapter_does(before, after, change, answer):
    assert tour_questions.presence_or_pose("m", IMAGE, before, after, change, 4, "7").answer == answer


def test_the_parts_question_is_the_chapters_verdict_on_both_sides_of_chance():
    base = {"both_right": 990, "cnn_right": [100, 20.4, 9.7, 14.2], "caps_right": [100, 9.5, 20.1, 15.2]}
    assert tour_questions.parts_who("m", base, "halves").answer == "cnn"
    assert tour_questions.parts_who("m", base, "sides").answer == "caps"
    assert tour_questions.parts_who("m", base, "quadrants").answer == "same"


@pytest.mark.parametrize(
    "move, s1, answer",
    [(0.5, 1.0, "together"), (0.5, 1.5, "scatter"), (0.05, 1.02, "still")],
)
def test_the_votes_question_decides_as_the_chapter_does(move, s1, answer):
    sweep = {"images": 10, "shift_values": [0.0, 4.0], "shift_mean_move": [0, move], "shift_spread_before": [1.0, 1.0]}
    sweep["shift_spread_after"] = [1.0, s1]
    assert tour_questions.votes_together("m", sweep, 4.0).answer == answer


@pytest.mark.parametrize("with_, without, answer", [(0.07, 0.066, "same"), (0.2, 0.1, "more"), (0.05, 0.1, "less")])
def test_the_coordinates_question_decides_as_the_chapter_does(with_, without, answer):
    sweep = {"shift_values": [0.0, 4.0], "shift_position_move": [0, with_], "shift_position_move_plain": [0, without]}
    assert tour_questions.coordinates_more("m", sweep, 4.0).answer == answer


def test_a_guess_is_not_obviously_right():
    places, offered = Counter(), Counter()
    for seed in range(40):
        rng = np.random.default_rng(seed)
        lengths = rng.random(10)
        q = tour_questions.longest_class("m", rng.random((28, 28)), lengths, [str(d) for d in range(10)], "3")
        places[q.keys.index(q.answer)] += 1
        offered["3" in q.keys] += 1
    assert len(places) == 4 and max(places.values()) < 25  # every place is used, none most of the time
    assert offered[True] == 40  # the picture's label is always a choice: the answer a student most likely gives
    near = tour_questions.still_near_uniform("m", IMAGE, np.full((4, 10), 0.1), 1.0, 0.1, 0.1, 2)
    assert near.answer == "near" and set(near.keys) == {"near", "away"}


def test_the_routing_inside_a_question_is_said_in_each_readers_language():
    from capsviz.analysis.steps import lab_routing_said

    q = tour_questions.lab_gap(
        "m",
        lab.Row("m", "d", "dynamic", 0.38, 10_000, 0, 0, 0, 0, 0, 0),
        lab.Row("m", "d", "uniform", 0.42, 10_000, 0, 0, 0, 0, 0, 0),
        lab_routing_said("uniform"),
    )
    assert q.answer == "same"
    kept = Words.load(q.text.dump())
    assert "uniform couplings" in str(kept)
    with speaking("zh-Hans"):
        chinese = str(kept)
        routing = str(lab_routing_said("uniform"))
    assert routing in chinese and "uniform couplings" not in chinese


def test_the_prediction_question_says_which_primary_capsule_it_asks_about_in_each_language(capsnet):
    """Asked before the step's table defines P1: the question names P1's place, kept as words, so
    the Teacher page and a reader of another language read it in theirs."""
    from capsviz.glossary import DIGIT_WORDS

    image = np.random.default_rng(0).random((28, 28)).astype(np.float32)
    trace = tour_of(capsnet.config).follow(capsnet, image)
    steps = walk(trace, [str(k) for k in range(10)], DIGIT_WORDS, "m", "3", "the input", [], capsnet.config)
    q = next(s.question for s in steps if s.question is not None and s.question.qid.startswith("tour-loudest"))
    kept = Words.load(q.text.dump())
    assert f"P1 ({trace.shown_names[0]})" in str(kept)
    with speaking("ja"):
        japanese = str(kept)
        place = t("type {type} at row {row}, col {col}", **trace.shown_places[0])
    assert f"P1（{place}）" in japanese and "type" not in japanese


def test_where_i_stand_counts_right_wrong_skipped_and_open():
    qs = [
        tour_questions.longest_class("m", np.full((28, 28), k, np.float32), np.eye(10)[k], [str(d) for d in range(10)], None)
        for k in range(4)
    ]
    wrong = next(x for x in qs[1].keys if x != qs[1].answer)
    answers = {qs[0].qid: (True, qs[0].answer), qs[1].qid: (True, wrong), qs[2].qid: (True, None)}
    rows = tour_questions.standing([(9, "Lengths", qs[3]), (2, "Primary", qs[0]), (4, "Votes", qs[1]), (5, "EM", qs[2])], answers)
    assert [r.step for r in rows] == [2, 4, 5, 9]
    assert [r.status for r in rows] == ["right", "wrong", "skipped", "open"] and [r.missed for r in rows] == [False, True, True, True]
    assert tour_questions.standing_words(rows) == "You got 1 of 4 questions right; 2 of them you skipped or have not answered yet."
    assert rows[1].words() == f"Step 4 (Votes): you said “{wrong}”; the answer is “1”."
    assert rows[0].words() == "Step 2 (Primary): right (“0”)." and rows[3].words() == "Step 9 (Lengths): not answered yet."
    assert tour_questions.standing_words(rows[:1]) == "You got 1 of 1 question right."
    assert tour_questions.standing_words([]) == "This tour asked no questions on this model and image."


# -- the page, as a student meets it ---------------------------------------------------------------


@pytest.fixture
def student(app, monkeypatch):
    """AppTest sessions as a browser on another machine: a student, not the teacher."""
    monkeypatch.setattr(pages.classroom, "address", lambda: "192.0.2.7")
    return app


def progress(at) -> str:
    return at.get("progress")[0].proto.text


def question_radio(at):
    return next((r for r in at.radio if r.key and r.key.startswith("answer_")), None)


def page_questions(folder: Path, name: str) -> dict:
    """The questions the tour page asks of model `name` in `folder` on the test set's first image, by id."""
    path = folder / name
    model, meta = load_checkpoint(path)
    model.eval()
    data = load_split(meta.image_dataset, "test")
    image = data.images[0].numpy().astype(np.float32) / 255
    names = [str(n) for n in meta.class_names]
    chapter = why_steps.chapter_for(meta, list_checkpoints(folder), path.stem)
    sweeps = {k: why_steps.stored_sweep(k, path, data, chapter.cnn_path) for k in chapter.sweeps}
    first = []
    if chapter.kind == "vector":
        cnn = load_checkpoint(chapter.cnn_path)[0].eval()
        first = why_steps.vector_chapter(model, cnn, image, names, path.stem, sweeps["invariance"], sweeps["parts"])
    trace = tour_of(meta.config).follow(model, image)
    steps = first + walk(trace, names, class_words(meta), path.stem, names[int(data.labels[0])], "x", [], meta.config)
    return {s.question.qid: s.question for s in steps if s.question is not None}


def test_a_student_predicts_each_step_then_sees_it_and_where_they_stand(student):
    asked = page_questions(student.folder, "tiny-capsnet.safetensors")
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params["model"] = "tiny-capsnet.safetensors"
    at.run()
    assert not at.exception, at.exception
    assert progress(at).startswith("Step 1 of 14: **Why capsules: invariance against equivariance")
    plan = ["right", "wrong", "skip"]
    done = {}
    for k in range(1, 15):
        assert not at.exception, (k, at.exception)
        radio = question_radio(at)
        if radio is not None:
            qid = radio.key.removeprefix("answer_")
            q = asked[qid]
            assert not at.get("plotly_chart") and len(at.image) == 1  # only the image followed: the step waits
            assert not at.info and not at.warning and plain(q.label(q.answer)) in radio.options
            how = plan[len(done) % 3]
            if how == "skip":
                next(b for b in at.button if b.key == f"skip_{qid}").click().run()
                done[qid] = (k, None)
            else:
                pick = q.answer if how == "right" else next(x for x in q.keys if x != q.answer)
                at.radio(key=radio.key).set_value(pick).run()
                next(b for b in at.button if b.key == f"commit_{qid}").click().run()
                done[qid] = (k, pick)
            assert not at.exception, at.exception
            verdict = " ".join(x.value for x in [*at.success, *at.info])
            assert plain(str(q.why)) in verdict  # the reveal says why, in one sentence
            assert question_radio(at) is None
        if at.button(key="tour_next").disabled:
            break
        at.button(key="tour_next").click().run()
    assert progress(at) == "Step 14 of 14: **Where I stand**"
    # every question the core asks, the page asked: not the parts step's nor the lab's, which need what the chapter
    # and the lab have not measured on this model
    assert set(done) == set(asked) and len(done) == 8
    right = sum(1 for qid, (_, pick) in done.items() if pick == asked[qid].answer)
    missed = sorted(step for qid, (step, pick) in done.items() if pick != asked[qid].answer)
    shown = " ".join(m.value for m in at.markdown)
    skipped = sum(1 for _, pick in done.values() if pick is None)
    summary = f"You got {right} of 8 questions right; {skipped} of them you skipped or have not answered yet."
    assert summary in shown, [m.value for m in at.markdown if "You got" in m.value]
    backs = sorted(int(b.key.removeprefix("tour_to_")) for b in at.button if b.key and b.key.startswith("tour_to_"))
    assert backs == missed
    s = store.store(student.folder)
    for qid, (_, pick) in done.items():
        split = s.split(qid)
        assert (split is not None and split.answered == 1 and split.counts[pick] == 1) if pick else (split is None or not split.answered)
    at.button(key=f"tour_to_{missed[0]}").click().run()
    assert progress(at).startswith(f"Step {missed[0]} of 14")


def test_the_teacher_sees_each_answer_at_once_and_is_told_the_summary_is_the_students(app):
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update({"model": "tiny-capsnet.safetensors", "step": "14"})
    at.run()
    assert not at.exception, at.exception
    assert progress(at) == "Step 14 of 14: **Where I stand**"
    assert any("As the teacher you see every answer at once" in c.value for c in at.caption)
    at.query_params["step"] = "1"
    first = AppTest.from_file(APP, default_timeout=180)
    first.query_params.update({"model": "tiny-capsnet.safetensors", "step": "1"})
    first.run()
    assert question_radio(first) is None and first.get("plotly_chart")  # the figure at once, the answer in a caption
    assert any(c.value.startswith("The answer: ") for c in first.caption)


def test_the_site_link_names_the_sites_own_step(app, monkeypatch):
    """The site's tour has no chapter steps: the app's step k of the walk is the site's k, and a
    chapter step or "Where I stand" opens the site's tour at its start."""
    from capsviz.site.links import site_tour_step

    assert [site_tour_step(k, 3, 5) for k in range(1, 10)] == [None, None, None, 1, 2, 3, 4, 5, None]
    monkeypatch.setenv("CAPSVIZ_SITE_URL", "https://example.org/site/")

    def site_url(step: int) -> str:
        at = AppTest.from_file(APP, default_timeout=180)
        at.query_params.update({"model": "tiny-capsnet.safetensors", "step": str(step)})
        at.run()
        assert not at.exception, at.exception
        urls = [b.proto.url for b in at.get("link_button") if "example.org" in b.proto.url]
        assert len(urls) == 1, (step, [m.value for m in at.warning])
        return urls[0]

    assert "step=" not in site_url(1)  # the chapter: the site's tour from its start
    last = site_url(14)  # Where I stand
    assert "step=" not in last
    walk = [k for k in range(2, 14) if "step=" in site_url(k)]
    assert walk and "step=1&" in site_url(walk[0]) + "&" and len(walk) == walk[-1] - walk[0] + 1


def test_on_the_projector_the_teacher_shows_the_choices_and_reveals_the_answer_when_ready(app):
    """Projected, the teacher's screen is the room's: the question and its choices, how many have
    answered, and the answer and the figure only when the teacher reveals them."""
    at = AppTest.from_file(APP, default_timeout=180)
    at.query_params.update({"model": "tiny-capsnet.safetensors", "step": "1", "projector": "1"})
    at.run()
    assert not at.exception, at.exception
    assert not any(c.value.startswith("The answer: ") for c in at.caption) and not at.get("plotly_chart")
    assert question_radio(at) is None  # the teacher does not answer
    choices = next(m.value for m in at.markdown if m.value.startswith("**A** · "))
    assert choices.splitlines()[1].startswith("**B** · ")  # lettered: a choice may be a digit
    assert any(c.value == "0 students have answered so far." for c in at.caption)
    reveal = next(b for b in at.button if b.key and b.key.startswith("reveal_"))
    reveal.click().run()
    assert any(s.value.startswith("The answer: ") for s in at.success) and at.get("plotly_chart")
