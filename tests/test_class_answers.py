"""Students answer before they see (issue 54, items 1 and 3): questions from the real model and
the playground's numbers, answers in the class's store (30 students over two replicas, a restart,
a revote), and the Teacher page, which only the teacher opens."""

import csv
import io
import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import test_app
from streamlit.testing.v1 import AppTest

import pages.classroom
import pages.common
from capsviz import access, store
from capsviz import checkpoint as ckpt
from capsviz.analysis import dimension_effect, perturbation_grid, predict, questions
from capsviz.analysis.playground import DYNAMIC_PRESETS, EM_PRESETS, dynamic_toy, em_toy, split_words
from capsviz.errors import CapsvizError
from capsviz.viz import thumbnail

APP = test_app.APP
app, router_mode = test_app.app, test_app.router_mode
ROOT = Path(__file__).resolve().parents[1]
SHIPPED = sorted((ROOT / "checkpoints").glob("*.safetensors"))


def ask(q: questions.Question, s: store.Store, who: str, choice: str, reason: str = "") -> int:
    text, labels = q.kept()
    about = (q.model_name(), "" if q.picture is None else thumbnail(q.picture))  # as pages.asking records it
    return s.answer(q.qid, q.page, text, q.keys, labels, q.answer, who, choice, reason, about)


# -- the questions ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_the_longest_capsule_question_answers_what_the_chart_shows_for_every_shipped_model(path):
    model, meta = ckpt.load_checkpoint(path)
    names = meta.class_names
    rng = np.random.default_rng(0)
    size = meta.config.in_size
    channels = getattr(meta.config, "in_channels", 1)
    for k in range(3):
        image = rng.random((size, size) if channels == 1 else (channels, size, size)).astype(np.float32)
        pred = predict(model, image)
        q = questions.longest_capsule(path.stem, image, pred.scores, pred.predicted, names, names[k])
        assert q.answer == str(pred.predicted) == str(int(np.argmax(pred.scores)))  # the bar the chart marks
        assert q.answer in q.keys and len(set(q.keys)) == len(q.keys) <= questions.MOST_CHOICES
        assert names[pred.predicted] in str(q.why) and f"{pred.scores[pred.predicted]:.2f}" in str(q.why)
        assert q.qid == questions.longest_capsule(path.stem, image, pred.scores, pred.predicted, names, names[k]).qid
        if meta.config.decodes and k == 0:  # the explorer's second question: the grid's tallest effect bar
            effect = dimension_effect(perturbation_grid(model, pred.capsules[pred.predicted], pred.predicted))
            d = questions.strongest_dimension(path.stem, image, pred.predicted, names[pred.predicted], effect)
            assert d.answer == str(int(np.argmax(effect))) and d.answer in d.keys and len(d.keys) == 3
            assert f"d{d.answer} " in str(d.why)


@pytest.mark.parametrize("preset", list(DYNAMIC_PRESETS))
@pytest.mark.parametrize("T", [1, 3])
def test_the_playground_question_answers_what_its_sentence_says(preset, T):
    points = DYNAMIC_PRESETS[preset][:, :2]
    toy = dynamic_toy(points, T)
    said = split_words(toy.c[-1])  # the sentence the playground shows beside the figure
    for k in range(len(points)):
        q = questions.routed_split(toy, k, ("dynamic", preset, 2, T))
        if q.answer == questions.UNIFORM:
            assert f"{k + 1} (largest" in said and "near uniform" in said
        else:
            assert f"to upper {q.answer}" in said
            assert questions.split_of(toy.c[-1, k]) == str(int(toy.c[-1, k].argmax()) + 1)
    if T == 1:  # before any agreement is measured, every coupling is uniform
        assert all(questions.routed_split(toy, k, ("dynamic", preset, 2, 1)).answer == questions.UNIFORM for k in range(len(points)))


@pytest.mark.parametrize("preset", list(EM_PRESETS))
def test_the_em_question_answers_what_the_assignments_are(preset):
    votes, acts = EM_PRESETS[preset]
    toy = em_toy(votes[:, :2], acts, 3)
    for k in range(len(acts)):
        q = questions.em_assignment(toy, k, (preset, 2, 3, 0.0, 0.0, 0.3))
        r = toy.R[-1, k]
        assert q.answer == (questions.UNIFORM if q.answer == questions.UNIFORM else str(int(r.argmax()) + 1))


def test_the_right_answer_is_not_always_in_the_same_place():
    places = Counter()
    for seed in range(40):
        rng = np.random.default_rng(seed)
        scores = rng.random(10)
        q = questions.longest_capsule("m", rng.random((28, 28)), scores, int(scores.argmax()), [str(d) for d in range(10)])
        places[q.keys.index(q.answer)] += 1
    assert len(places) == 4 and max(places.values()) < 25  # every place is used, none most of the time


def test_a_wrong_image_label_is_offered_as_a_choice():
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.5, 0.1, 0, 0, 0, 0])
    q = questions.longest_capsule("m", np.zeros((28, 28)), scores, 0, [str(d) for d in range(10)], label="7")
    assert "7" in q.keys and "0" in q.keys  # the class the picture is of: the guess to beat


# -- the store: many students, two replicas, a restart ------------------------------------------


def test_thirty_students_over_two_replicas_are_counted_exactly_and_survive_a_restart(tmp_path, class_db):
    replicas = [store.Store(tmp_path), store.Store(tmp_path)]  # two app processes: two connections
    rng = np.random.default_rng(1)
    scores = rng.random(10)
    q = questions.longest_capsule("m", rng.random((28, 28)), scores, int(scores.argmax()), [str(d) for d in range(10)])
    students = [access.mint(tmp_path, f"10.0.0.{k % 3}")[0] for k in range(30)]
    picks = {who: q.keys[k % len(q.keys)] for k, who in enumerate(students)}
    barrier = threading.Barrier(30)

    def answer(k, who):
        barrier.wait()
        ask(q, replicas[k % 2], who, picks[who], reason="because" if k % 5 == 0 else "")

    threads = [threading.Thread(target=answer, args=(k, who)) for k, who in enumerate(students)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    expected = Counter(picks.values())
    split = replicas[0].split(q.qid)
    assert split.answered == 30 and split.counts == {k: expected[k] for k in q.keys} and not split.revealed
    assert replicas[1].split(q.qid) == split
    for s in replicas:
        s.close()
    again = store.Store(tmp_path)  # the server restarted
    assert again.split(q.qid) == split
    assert again.subjects([q.qid, "none"]) == {q.qid: ("m", thumbnail(q.picture))}  # kept with the first answer
    if class_db == "sqlite":
        assert again._read("PRAGMA journal_mode")[0][0] == "wal"

    # a revote after the discussion: a new round, hidden again; first and final answers both kept
    again.reveal(q.qid)
    assert again.mine(q.qid, students[0]) == (1, picks[students[0]], True)
    again.ask_again(q.qid)
    assert again.mine(q.qid, students[0]) == (2, None, False)
    for who in students[:10]:
        ask(q, again, who, q.answer)
    second = again.split(q.qid)
    assert second.round == 2 and second.answered == 10 and second.counts[q.answer] == 10
    both = again.first_and_final(q.qid)
    assert both[students[0]] == (picks[students[0]], q.answer) and both[students[20]] == (picks[students[20]],) * 2
    rows = again.answer_rows()
    assert len(rows) == 40 and {r[2] for r in rows} == {"m"}
    again.new_class()
    assert again.splits() == [] and again.answer_rows() == [] and again.subjects([q.qid]) == {}


def test_an_answer_must_be_one_of_the_choices(tmp_path, class_db):
    s = store.Store(tmp_path)
    q = questions.uniform_changes_winner(dynamic_toy(DYNAMIC_PRESETS[next(iter(DYNAMIC_PRESETS))][:, :2], 3), ("x",))
    with pytest.raises(CapsvizError, match="not one of the question's choices"):
        ask(q, s, "ann", "'; DROP TABLE answers; --")
    ask(q, s, "ann", q.keys[0], reason="x" * 5000)
    assert len(s.answer_rows()[0][8]) == store.MAX_REASON
    text, labels = q.kept()
    s.answer("huge", "explorer", text, q.keys, labels, q.answer, "ann", q.keys[0], about=("m", "A" * store.MAX_SUBJECT))
    assert s.subjects(["huge"]) == {} and s.split("huge").answered == 1  # a picture too large is not kept; the answer is


def test_the_export_names_no_student_and_runs_no_formula(tmp_path, class_db):
    s = store.Store(tmp_path)
    q = questions.uniform_changes_winner(dynamic_toy(DYNAMIC_PRESETS[next(iter(DYNAMIC_PRESETS))][:, :2], 3), ("x",))
    ask(q, s, "0123456789abcdef", q.keys[0], reason="=HYPERLINK(1)")
    text = questions.answers_csv(s.answer_rows(), access.label)
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == list(questions.CSV_COLUMNS) and len(rows) == 2
    assert "0123456789abcdef" not in text and rows[1][4] == access.label("0123456789abcdef")
    assert rows[1][8] == "'=HYPERLINK(1)"


# -- the pages --------------------------------------------------------------------------------


@pytest.fixture
def students(app, monkeypatch):
    """Every AppTest session a browser on another machine; none sends cookies, so each is minted an identity."""
    monkeypatch.setattr(pages.classroom, "address", lambda: "192.0.2.7")
    return app


def playground() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/playground.py").run()
    assert not at.exception, at.exception
    return at


def numbers(at) -> bool:
    return any("The numbers at iteration" in m.value for m in at.markdown)


def question_radio(at):
    return next(r for r in at.radio if r.key and r.key.startswith("answer_"))


def test_a_student_answers_before_the_figure_and_the_teacher_counts_it(students, monkeypatch):
    ann = playground()
    assert not numbers(ann) and not ann.dataframe  # the figure and its numbers wait
    radio = question_radio(ann)
    qid = radio.key.removeprefix("answer_")
    commit = next(b for b in ann.button if b.key == f"commit_{qid}")
    assert commit.disabled
    pick = ann.session_state["pg_question"].keys[0]
    radio.set_value(pick).run()
    next(b for b in ann.button if b.key == f"commit_{qid}").click().run()
    assert not ann.exception, ann.exception
    assert numbers(ann) and ann.dataframe  # revealed, with the sentence why
    assert any(m.value for m in [*ann.success, *ann.info])
    split = store.store(students.folder).split(qid)
    assert split.answered == 1 and split.counts[pick] == 1

    bob = playground()  # another student skips: the figure, no answer recorded
    next(b for b in bob.button if b.key == f"skip_{qid}").click().run()
    assert numbers(bob)
    assert store.store(students.folder).split(qid).answered == 1
    assert not any("How the class answered" in c.value for c in ann.caption)  # hidden until the teacher reveals

    # the teacher: the page, the count, the reveal
    monkeypatch.setattr(pages.classroom, "address", lambda: access.LOCAL)
    teacher = AppTest.from_file(APP, default_timeout=60)
    teacher.switch_page("pages/teacher.py").run()
    assert not teacher.exception, teacher.exception
    assert teacher.metric[0].value == "2"  # ann and bob, counted by identity
    table = teacher.table[-1].value  # the question's split
    assert int(table.iloc[:, 1].sum()) == 1
    next(b for b in teacher.button if b.key == f"teacher_reveal_{qid}").click().run()
    assert store.store(students.folder).split(qid).revealed
    monkeypatch.setattr(pages.classroom, "address", lambda: "192.0.2.7")
    ann.run()
    assert any("How the class answered" in c.value for c in ann.caption)


def test_a_student_cannot_open_the_teacher_page(students, monkeypatch):
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/teacher.py").run()
    assert "Teacher" not in [x.value for x in at.title]  # not listed for a student: the address leads elsewhere
    assert not at.metric and not [b for b in at.button if b.key and b.key.startswith("teacher_")]
    # the page itself refuses too, were it run past app.py's router (a direct run hands itself to the router)
    monkeypatch.setattr(pages.common, "require_router", lambda: None)
    direct = AppTest.from_file(str(ROOT / "pages" / "teacher.py"), default_timeout=60)
    direct.run()
    assert any("teacher's" in w.value for w in direct.warning) and not direct.metric


def test_a_committed_question_leaves_the_next_one_on_the_page_waiting_for_its_own_commit(students):
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/explorer.py").run()
    first = question_radio(at)
    next(b for b in at.button if b.key == f"skip_{first.key.removeprefix('answer_')}").click().run()
    assert not at.exception, at.exception
    second = question_radio(at)  # the perturbation grid's question, under the sliders
    assert second.key != first.key
    second.set_value(second.options[0]).run()  # chosen, not yet committed: the grid still waits
    assert not at.exception, at.exception
    assert question_radio(at).key == second.key and not any("Perturbation grid" in h.value for h in at.subheader)
    commit = next(b for b in at.button if b.key == f"commit_{second.key.removeprefix('answer_')}")
    assert not commit.disabled
    commit.click().run()
    assert any("Perturbation grid" in h.value for h in at.subheader)


def test_the_teacher_starts_a_new_class_and_exports(app):
    s = store.store(app.folder)
    q = questions.uniform_changes_winner(dynamic_toy(DYNAMIC_PRESETS[next(iter(DYNAMIC_PRESETS))][:, :2], 3), ("x",))
    ask(q, s, "0123456789abcdef", q.keys[0])
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/teacher.py").run()
    assert not at.exception, at.exception
    assert at.button(key="teacher_new_class").disabled
    at.checkbox(key="teacher_sure").check().run()
    at.button(key="teacher_new_class").click().run()
    assert s.splits() == []


def test_the_explorer_hides_the_lengths_until_the_student_answers(students):
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/explorer.py").run()
    assert not at.exception, at.exception
    radio = question_radio(at)
    assert not at.get("plotly_chart") and not [s for s in at.selectbox if s.key and s.key.startswith("capsule_")]  # lengths hidden
    qid = radio.key.removeprefix("answer_")
    next(b for b in at.button if b.key == f"skip_{qid}").click().run()
    assert not at.exception, at.exception
    assert len(at.get("plotly_chart")) == 1 and [s for s in at.selectbox if s.key and s.key.startswith("capsule_")]
    assert any("skipped this one" in m.value for m in at.info)
    second = question_radio(at)  # which dimension changes the drawing most: the grid and its effects wait
    assert second.key != radio.key and not any("Perturbation grid" in h.value for h in at.subheader)
    next(b for b in at.button if b.key == f"skip_{second.key.removeprefix('answer_')}").click().run()
    assert not at.exception, at.exception
    assert len(at.get("plotly_chart")) == 2 and any("Perturbation grid" in h.value for h in at.subheader)


def test_the_teacher_page_counts_thirty_students_of_two_replicas_exactly(app):
    replicas = [store.Store(app.folder), store.Store(app.folder)]
    q = questions.uniform_changes_winner(dynamic_toy(DYNAMIC_PRESETS[next(iter(DYNAMIC_PRESETS))][:, :2], 3), ("thirty",))
    for k in range(30):
        who = access.mint(app.folder, f"10.1.0.{k}")[0]
        replicas[k % 2].seen(who, f"10.1.0.{k}", "playground", False)
        ask(q, replicas[k % 2], who, q.keys[0] if k < 19 else q.keys[1])
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/teacher.py").run()
    assert not at.exception, at.exception
    assert at.metric[0].value == "30"
    assert any("30 students answered in round 1" in c.value for c in at.caption)
    table = at.table[-1].value
    assert dict(zip(table.iloc[:, 0], table.iloc[:, 1], strict=True)) == {
        q.label(q.keys[0]) + (" ✓" if q.keys[0] == q.answer else ""): 19,
        q.label(q.keys[1]) + (" ✓" if q.keys[1] == q.answer else ""): 11,
    }


def test_the_teacher_page_shows_the_most_answered_questions_whole_and_sums_the_others_by_page(app):
    """A class each on its own images: 40 questions of one student each on the explorer and the
    playground, two the class shared. The two shared and the oldest ten of the rest are shown
    whole (with their buttons), the other 30 as one row a page: how many, answers, right answers.
    A question asked again keeps its place."""
    s = store.store(app.folder)
    rng = np.random.default_rng(3)
    names = [str(d) for d in range(10)]
    own = []
    for k in range(40):
        scores = rng.random(10)
        q = questions.longest_capsule("m", rng.random((28, 28)), scores, int(scores.argmax()), names)
        page = "explorer" if k % 2 else "playground"
        q = questions.Question(q.qid, page, q.text, q.keys, q.labels, q.answer, q.why)
        ask(q, s, access.mint(app.folder, f"10.2.0.{k}")[0], q.answer if k % 4 == 0 else next(c for c in q.keys if c != q.answer))
        own.append(q)
    shared = []
    for n, t in ((6, "shared-a"), (9, "shared-b")):
        q = questions.uniform_changes_winner(dynamic_toy(DYNAMIC_PRESETS[next(iter(DYNAMIC_PRESETS))][:, :2], 3), (t,))
        for k in range(n):
            ask(q, s, access.mint(app.folder, f"10.3.{n}.{k}")[0], q.answer)
        shared.append(q)
    s.ask_again(shared[1].qid)  # round 2: nobody has answered it yet
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page("pages/teacher.py").run()
    assert not at.exception, at.exception
    whole = [b.key.removeprefix("teacher_reveal_") for b in at.button if b.key and b.key.startswith("teacher_reveal_")]
    assert whole == [shared[1].qid, shared[0].qid] + [q.qid for q in own[:10]]  # most students first, then the oldest
    assert any("30 more questions" in m.value for m in at.markdown)
    rest = own[10:]
    table = at.table[-1].value
    rows = {row.iloc[0]: tuple(row.iloc[1:]) for _, row in table.iterrows()}
    for page, title in (("explorer", "DigitCaps explorer"), ("playground", "Routing playgrounds")):
        mine = [k for k, q in enumerate(own) if q.page == page and q in rest]
        assert rows[title] == (len(mine), len(mine), sum(1 for k in mine if k % 4 == 0))


def test_the_teacher_tells_questions_on_two_images_apart_by_their_picture_and_model(students, monkeypatch):
    """Two students answer the explorer's question on two test images: the same words, so the
    Teacher page shows each beside the image it was asked on and the model's name; a playground
    question (a toy, no model) has neither. The export names the model too."""
    from capsviz.analysis import image_at
    from capsviz.data.mnist import load_mnist

    asked = {}
    for index in (3, 8):
        at = AppTest.from_file(APP, default_timeout=60)
        at.query_params["image"] = str(index)
        at.switch_page("pages/explorer.py").run()
        assert not at.exception, at.exception
        assert not any("(label" in c for e in at.get("image") for c in e.captions)  # the label waits too
        radio = question_radio(at)
        qid = radio.key.removeprefix("answer_")
        radio.set_value(radio.options[0]).run()
        next(b for b in at.button if b.key == f"commit_{qid}").click().run()
        assert not at.exception, at.exception
        asked[qid] = index
    toy = playground()
    toy_qid = question_radio(toy).key.removeprefix("answer_")
    next(b for b in toy.button if b.key == f"skip_{toy_qid}").click().run()
    s = store.store(students.folder)
    q = questions.uniform_changes_winner(dynamic_toy(DYNAMIC_PRESETS[next(iter(DYNAMIC_PRESETS))][:, :2], 3), ("toy",))
    ask(q, s, "0123456789abcdef", q.keys[0])

    about = s.subjects([*asked, q.qid])
    assert set(about) == set(asked)  # the toy's question is about no model and no image
    images = load_mnist("mnist", "test").images
    for qid, index in asked.items():
        model, picture = about[qid]
        assert model == "tiny-capsnet"
        assert picture == thumbnail(image_at(images, index))  # the image it was asked on, at twice its size
    assert about[next(iter(asked))][1] != about[list(asked)[1]][1]

    monkeypatch.setattr(pages.classroom, "address", lambda: access.LOCAL)
    teacher = AppTest.from_file(APP, default_timeout=60)
    teacher.switch_page("pages/teacher.py").run()
    assert not teacher.exception, teacher.exception
    assert len(teacher.get("image")) == 2  # one beside each explorer question, none beside the toy's
    assert [c.value for c in teacher.caption].count("Model: tiny-capsnet") == 2
    rows = list(csv.reader(io.StringIO(questions.answers_csv(s.answer_rows(), access.label))))
    assert sorted(r[2] for r in rows[1:]) == ["", "tiny-capsnet", "tiny-capsnet"]


def test_a_questions_model_is_named_as_the_sidebar_names_it():
    def named(model):
        return questions.Question("q", "p", questions.Words.as_is("x"), (), (), "a", questions.Words.as_is("y"), model).model_name()

    assert named("/srv/checkpoints/capsnet-mnist.safetensors:1732871234.5") == "capsnet-mnist"  # a page's cache key
    assert named("capsnet-mnist") == named("capsnet-mnist.safetensors") == "capsnet-mnist"  # the tour's stem, the site's file
    assert named(r"C:\models\cnn-small.safetensors:12") == "cnn-small" and named("") == ""


def test_a_projected_teacher_page_keeps_a_revotes_changes_for_the_reveal(app):
    """Projected, a question asked again hides its split, its right answer, how many changed their
    answer and the students' reasons until the teacher reveals it; unprojected, the teacher sees
    them at once, each reason as typed (no Markdown) beside the answer it came with."""
    s = store.store(app.folder)
    q = questions.uniform_changes_winner(dynamic_toy(DYNAMIC_PRESETS[next(iter(DYNAMIC_PRESETS))][:, :2], 3), ("revote",))
    wrong = next(k for k in q.keys if k != q.answer)
    people = [access.mint(app.folder, f"10.4.0.{k}")[0] for k in range(4)]
    for who in people:
        ask(q, s, who, wrong)
    s.ask_again(q.qid)
    for k, who in enumerate(people):
        ask(q, s, who, q.answer, reason=["**bold** [a](http://x)", "", "votes agree", ""][k])

    def changed(at) -> bool:
        return any("changed their answer since round 1" in c.value for c in at.caption)

    for projected, revealed, shown in ((False, False, True), (True, False, False), (True, True, True)):
        s.reveal(q.qid, revealed)
        at = AppTest.from_file(APP, default_timeout=60)
        if projected:
            at.query_params["projector"] = "1"
        at.switch_page("pages/teacher.py").run()
        assert not at.exception, at.exception
        split = [x for x in at.table if x.value.columns[0] == "answer"]
        assert changed(at) == shown and bool(split) == shown, (projected, revealed)
        reasons = [x.value for x in at.text]
        assert bool(at.expander and any("2 reasons given" in e.label for e in at.expander)) == shown
        assert sorted(reasons) == (sorted(f"{q.label(q.answer)}: {r}" for r in ("**bold** [a](http://x)", "votes agree")) if shown else [])


@pytest.mark.parametrize("top2, labels, named", [((3, 7), (7, 3), "2"), ((3, 5), (7, 3), "1"), ((1, 2), (7, 3), "0")])
def test_the_multimnist_question_counts_the_digits_named(top2, labels, named):
    q = questions.both_digits("m", np.zeros((36, 36)), top2, labels)
    assert q.answer == named and set(q.keys) == {"0", "1", "2"}


def test_the_multimnist_page_hides_the_lengths_until_the_student_answers(students):
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["model"] = "tiny-multimnist.safetensors"
    at.switch_page("pages/multimnist.py").run()
    assert not at.exception, at.exception
    radio = question_radio(at)
    assert not at.get("plotly_chart") and not any("Reconstruct one capsule" in h.value for h in at.subheader)
    radio.set_value("2").run()
    next(b for b in at.button if b.key == f"commit_{radio.key.removeprefix('answer_')}").click().run()
    assert not at.exception, at.exception
    assert at.get("plotly_chart") and any("Reconstruct one capsule" in h.value for h in at.subheader)
