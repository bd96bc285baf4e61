"""The guided tour's questions: before a step shows what the model did, the student predicts it.

Each question is built by the walk that fills its step (capsviz/families/NAME/tour.py,
capsviz.analysis.why_steps), from the very arrays it puts in the step's `data`, which the page
draws: its answer key is computed here from those numbers with the rules the step's sentences use
(capsviz.analysis.rules), never stored. The wrong choices are the answers a student could
reasonably give (the runner-up classes, the class the picture is of, the folklore's answer),
shuffled by the question's id, so every student of a class sees the same order and the right one
is not always first.

A question's id names the model, the image and the numbers it asks about, so every student who
follows the same image through the same model answers the same question, and a retrained model's
question is a new one. `standing` says, at the end of the tour, which of them a student got right.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from capsviz.analysis import rule_words, rules
from capsviz.analysis.questions import UNIFORM, Question, Words, class_choices, question_id, runner_up, shuffled, split_of, two
from capsviz.i18n import t, tn

TOUR_PAGE = "tour"  # the page the class's store files the tour's answers under
OTHER_CLASS = "other"  # the key of "another class"


def _id(kind: str, model: str, image: np.ndarray, *numbers) -> str:
    """A tour question's id: its kind, the model's name, the image and the numbers it asks about."""
    arrays = [np.ascontiguousarray(np.asarray(n, dtype=np.float64)) for n in numbers]
    return question_id(f"tour-{kind}", model, np.ascontiguousarray(image, dtype=np.float32), *arrays)


# -- which class ----------------------------------------------------------------------------------


def longest_class(model: str, image: np.ndarray, lengths: np.ndarray, names, label: str | None) -> Question:
    """ "Which class capsule will be the longest?" for the lengths step's bars (J,)."""
    lengths = np.asarray(lengths, dtype=np.float64)
    qid = _id("longest", model, image, lengths)
    winner = int(lengths.argmax())
    keys, labels = class_choices(qid, lengths, winner, names, label)
    second = runner_up(lengths, winner)
    why = Words.t(
        "The {name} capsule is the longest, at {length}; the next longest is {other}, at {other_length}.",
        name=names[winner],
        length=two(lengths[winner]),
        other=names[second],
        other_length=two(lengths[second]),
    )
    text = Words.t("This image goes through the model. Which class capsule will be the longest (the model's answer)?")
    return Question(qid, TOUR_PAGE, text, keys, labels, str(winner), why, model, image)


def most_active_class(model: str, image: np.ndarray, a: np.ndarray, names, label: str | None) -> Question:
    """ "Which class capsule will be the most active?" for the matrix tour's activation bars (J,)."""
    a = np.asarray(a, dtype=np.float64)
    qid = _id("active", model, image, a)
    winner = int(a.argmax())
    keys, labels = class_choices(qid, a, winner, names, label)
    second = runner_up(a, winner)
    why = Words.t(
        "The {name} capsule is the most active, at {a}; the next is {other}, at {other_a}.",
        name=names[winner],
        a=two(a[winner]),
        other=names[second],
        other_a=two(a[second]),
    )
    text = Words.t("After EM routing, which class capsule will be the most active (the model's answer)?")
    return Question(qid, TOUR_PAGE, text, keys, labels, str(winner), why, model, image)


def loudest_prediction(model: str, image: np.ndarray, lengths: np.ndarray, names, capsule: str, routed: int) -> Question:
    """ "For which class will this primary capsule's prediction be the longest?" for one column of
    the CapsNet tour's prediction table (`lengths` (J,), one per class capsule). Routing's winner
    `routed` is always a choice: the answer most students give."""
    lengths = np.asarray(lengths, dtype=np.float64)
    qid = _id("loudest", model, image, lengths)
    top = int(lengths.argmax())
    keys, labels = class_choices(qid, lengths, top, names, names[routed])
    if top == routed:
        second = runner_up(lengths, top)
        why = Words.t(
            "Its longest prediction is for {top} ({top_length}), the class routing picks too; the next is for {other} ({other_length}).",
            top=names[top],
            top_length=two(lengths[top]),
            other=names[second],
            other_length=two(lengths[second]),
        )
    else:
        why = Words.t(
            "Its longest prediction is for {top} ({top_length}); for {routed}, the class routing picks, it is {routed_length}.",
            top=names[top],
            top_length=two(lengths[top]),
            routed=names[routed],
            routed_length=two(lengths[routed]),
        )
    text = Words.t(
        "Primary capsule {capsule} makes one prediction u_hat for every class capsule. For which class will its prediction be the longest?",
        capsule=capsule,
    )
    return Question(qid, TOUR_PAGE, text, keys, labels, str(top), why, model, image)


def loudest_capsule(model: str, image: np.ndarray, lengths: np.ndarray, name: str) -> Question:
    """ "Which primary capsule's prediction for class `name` will be the longest?" for one column of
    Efficient-CapsNet's prediction table (`lengths` (I,), one per primary capsule). The choices:
    the longest, one from the middle and the shortest, so the answer is not the only one offered."""
    lengths = np.asarray(lengths, dtype=np.float64)
    order = [int(i) for i in np.argsort(-lengths, kind="stable")]
    picked = list(dict.fromkeys([order[0], order[len(order) // 2], order[-1]]))
    qid = _id("loudest-capsule", model, image, lengths)
    keys, labels = shuffled(qid, [(str(i), Words.t("capsule {i}", i=i + 1)) for i in picked])
    why = Words.t(
        "Capsule {top}'s prediction for {name} is the longest ({top_length}); capsule {low}'s, the shortest ({low_length}).",
        top=order[0] + 1,
        top_length=two(lengths[order[0]]),
        name=name,
        low=order[-1] + 1,
        low_length=two(lengths[order[-1]]),
    )
    text = Words.t(
        "Every primary capsule predicts the {name} capsule. Which primary capsule's prediction for {name} will be the longest?", name=name
    )
    return Question(qid, TOUR_PAGE, text, keys, labels, str(order[0]), why, model, image)


# -- how long, how spread ---------------------------------------------------------------------------


def mostly_long(model: str, image: np.ndarray, lengths: np.ndarray, limit: float, most: float) -> Question:
    """ "Will more than half of the primary capsules be longer than `limit`?" for the primary step's
    lengths (any shape), decided as its sentence decides (more than `most` of them)."""
    lengths = np.asarray(lengths, dtype=np.float64)
    share = float((lengths > limit).mean())
    qid = _id("long", model, image, lengths)
    keys, labels = shuffled(
        qid,
        [("most", Words.t("More than half of them")), ("few", Words.t("Half of them or fewer"))],
    )
    count = int((lengths > limit).sum())
    why = Words.tn(
        "{n} of the {total} primary capsules is longer than {limit} ({share}).",
        "{n} of the {total} primary capsules are longer than {limit} ({share}).",
        count,
        share=f"{share:.0%}",
        total=f"{lengths.size:,}",
        limit=limit,
    )
    text = Words.t(
        "A primary capsule's length is meant to say how sure it is that its part is there. How many of the {n} primary "
        "capsules will be longer than {limit}?",
        n=f"{lengths.size:,}",
        limit=limit,
    )
    return Question(qid, TOUR_PAGE, text, keys, labels, "most" if share > most else "few", why, model, image)


def first_split(model: str, image: np.ndarray, c: np.ndarray, names, W: int, R: int) -> Question:
    """ "In iteration 1, how will each primary capsule split its prediction?" for the CapsNet
    tour's first routing iteration, c (I, J): evenly by the near-uniform rule, else mostly to the
    predicted class, the runner-up or another class (the mean coupling's largest)."""
    c = np.asarray(c, dtype=np.float64)
    I, J = c.shape
    mean = c.mean(0)  # (J,)
    split = split_of(mean)
    top = int(mean.argmax())
    answer = UNIFORM if split == UNIFORM else str(W) if top == W else str(R) if top == R else OTHER_CLASS
    qid = _id("first-split", model, image, c)
    keys, labels = shuffled(
        qid,
        [
            (UNIFORM, Words.t("Evenly: {u} to each", u=two(1 / J))),
            (str(W), Words.t("Most of it to {name}", name=names[W])),
            (str(R), Words.t("Most of it to {name}", name=names[R])),
            (OTHER_CLASS, Words.t("Most of it to another class")),
        ],
    )
    if answer == UNIFORM and two(c.min()) == two(c.max()):
        why = Words.t(
            "Every coupling is {u}, the uniform 1/{J}: routing starts from b = 0, and softmax(0) splits evenly.",
            u=two(c.min()),
            J=J,
        )
    elif answer == UNIFORM:
        why = Words.t(
            "The couplings run from {lo} to {hi}, near the uniform 1/{J} = {u}: no class gets much more than the others.",
            lo=two(c.min()),
            hi=two(c.max()),
            J=J,
            u=two(1 / J),
        )
    else:
        why = Words.t(
            "Averaged over the {I} primary capsules, the largest coupling is {share}, to {name} (uniform {u}).",
            I=I,
            share=two(mean[top]),
            name=names[top],
            u=two(1 / J),
        )
    text = Words.t(
        "Routing begins with every logit b at 0. In iteration 1, how will each primary capsule split its prediction over the {J} class capsules?",
        J=J,
    )
    return Question(qid, TOUR_PAGE, text, keys, labels, answer, why, model, image)


def still_near_uniform(
    model: str, image: np.ndarray, c: np.ndarray, entropy_mean: float, share: float, uniform: float, iteration: int | None
) -> Question:
    """ "Will the couplings, taken together, still be near uniform?" for a routing step's couplings c
    (I, J), decided by the rule its measured sentence uses: their mean evenness `entropy_mean`
    and the predicted class's mean share `share` against `uniform`. `iteration`: the CapsNet
    tour's (from 1), None for Efficient-CapsNet's one pass of self-attention."""
    qid = _id("uniform", model, image, c)
    keys, labels = shuffled(
        qid,
        [("near", Words.t("Still near uniform")), ("away", Words.t("Moved away from uniform"))],
    )
    near = rules.near_uniform(entropy_mean, share, uniform)
    why = Words.t(
        "Taken together, the couplings are {verdict}.",
        verdict=rule_words.uniform_words(entropy_mean, share, uniform),
    )
    if iteration is None:
        text = Words.t(
            "Self-attention routing sets every coupling in one pass. Will this image's couplings, taken together, be near uniform?"
        )
    else:
        text = Words.t(
            "After iteration {k}, will the primary capsules' couplings, taken together, still be near uniform (by the routing lab's rule)?",
            k=iteration,
        )
    return Question(qid, TOUR_PAGE, text, keys, labels, "near" if near else "away", why, model, image)


def em_vote(model: str, image: np.ndarray, iteration: int, R_row: np.ndarray, names, W: int, R: int, layer: str) -> Question:
    """ "Where will this lower capsule's vote go?" for one row of an EM iteration's assignments
    R (J,) of the most active capsule of the class layer's input `layer`, the matrix tour's first table row: near uniform by the near-uniform rule (split_of),
    else to the class with the largest assignment (the predicted one, the runner-up or another)."""
    R_row = np.asarray(R_row, dtype=np.float64)
    J = len(R_row)
    split = split_of(R_row)
    top = int(R_row.argmax())
    answer = UNIFORM if split == UNIFORM else str(W) if top == W else str(R) if top == R else OTHER_CLASS
    qid = _id("em-vote", model, image, R_row, iteration)
    keys, labels = shuffled(
        qid,
        [
            (UNIFORM, Words.t("Shared about evenly (near uniform)")),
            (str(W), Words.t("Mostly to {name}", name=names[W])),
            (str(R), Words.t("Mostly to {name}", name=names[R])),
            (OTHER_CLASS, Words.t("Mostly to another class")),
        ],
    )
    if answer == UNIFORM:
        why = Words.t(
            "Its assignments run from {lo} to {hi}, against the uniform {u}: no class capsule's Gaussian explains its vote much better.",
            lo=two(R_row.min()),
            hi=two(R_row.max()),
            u=two(1 / J),
        )
    else:
        why = Words.t(
            "Its largest assignment is {share}, to {name}, against the uniform {u}: that class capsule's Gaussian explains its vote best.",
            share=two(R_row[top]),
            name=names[top],
            u=two(1 / J),
        )
    text = Words.t("After EM iteration {k}, where will the vote of the most active {layer} capsule be assigned?", k=iteration, layer=layer)
    return Question(qid, TOUR_PAGE, text, keys, labels, answer, why, model, image)


def rotation_range(model: str, image: np.ndarray, pose: np.ndarray) -> Question:
    """ "Will every entry of this pose matrix lie between -1 and 1, as a rotation matrix's do?" for
    the matrix tour's primary step (its table), decided as steps.pose_words decides."""
    pose = np.asarray(pose, dtype=np.float64)
    lo, hi = float(pose.min()), float(pose.max())
    qid = _id("pose", model, image, pose)
    keys, labels = shuffled(
        qid,
        [("inside", Words.t("Yes: all 16 between -1 and 1")), ("beyond", Words.t("No: some lie beyond -1 to 1"))],
    )
    why = Words.t("Its 16 entries run from {lo} to {hi}.", lo=f"{lo:.3f}", hi=f"{hi:.3f}")
    text = Words.t(
        "The paper means a capsule's 4x4 matrix to hold the pose of its part. Will every entry of the most active primary "
        "capsule's matrix lie between -1 and 1, as a rotation matrix's entries do?"
    )
    return Question(qid, TOUR_PAGE, text, keys, labels, "beyond" if max(abs(lo), abs(hi)) > 1 else "inside", why, model, image)


# -- why capsules ----------------------------------------------------------------------------------


def changes_more(model: str, image: np.ndarray, cnn: float, caps: float, shift: int) -> Question:
    """ "Which changes more when this digit moves?" for the chapter's invariance step: `cnn`, how
    far the CNN's pooled features move, and `caps`, how far the winning capsule's vector moves,
    each as a share (%) of its own size at `shift` pixels (the step's charts); within a tenth of
    each other (rules.trend) they change about the same."""
    verdict = rules.trend(caps, cnn)
    answer = "cnn" if verdict == "rises" else "caps" if verdict == "falls" else "same"
    qid = _id("changes", model, image, [cnn, caps, shift])
    keys, labels = shuffled(
        qid,
        [
            ("cnn", Words.t("The CNN's pooled features")),
            ("caps", Words.t("The winning capsule's vector")),
            ("same", Words.t("About the same (within a tenth of each other)")),
        ],
    )
    why = Words.t(
        "On this digit the CNN's pooled features move by {cnn}% of their size, the winning capsule's vector by {caps}% of its size.",
        cnn=f"{cnn:.1f}",
        caps=f"{caps:.1f}",
    )
    text = Words.tn(
        "The story says pooling makes a CNN's features invariant, while a capsule changes with the pose. Move this digit {n} "
        "pixel to the right: which will change more, as a share of its own size?",
        "The story says pooling makes a CNN's features invariant, while a capsule changes with the pose. Move this digit {n} "
        "pixels to the right: which will change more, as a share of its own size?",
        shift,
    )
    return Question(qid, TOUR_PAGE, text, keys, labels, answer, why, model, image)


def presence_or_pose(model: str, image: np.ndarray, before: float, after: float, change: float, shift: int, name: str) -> Question:
    """ "What will the winning capsule do when this digit moves?" for the chapter's pose step: its
    length `before` and `after` the move and how far its vector moves (`change`, % of its size),
    decided as the chapter decides (why.invariance_words): nearly invariant, its length falling or
    rising by more than a tenth, else presence kept while the pose changes."""
    if rules.nearly_invariant(change / 100):
        answer = "still"
    else:
        level = rules.bounded_trend(before, after)
        answer = "falls" if level == "falls" else "rises" if level == "rises" else "turns"
    qid = _id("pose-move", model, image, [before, after, change, shift])
    keys, labels = shuffled(
        qid,
        [
            ("turns", Words.t("Its length (presence) stays and its vector turns (pose): equivariance")),
            ("falls", Words.t("It gets shorter by more than a tenth: it loses presence")),
            ("rises", Words.t("It gets longer by more than a tenth")),
            ("still", Words.t("It barely changes: nearly invariant")),
        ],
    )
    why = Words.t(
        "Its length goes from {before} to {after} and its vector moves by {change}% of its size.",
        before=f"{before:.2f}",
        after=f"{after:.2f}",
        change=f"{change:.1f}",
    )
    text = Words.tn(
        "Move this digit {n} pixel to the right. What will the winning capsule, the {name} capsule, do?",
        "Move this digit {n} pixels to the right. What will the winning capsule, the {name} capsule, do?",
        shift,
        name=name,
    )
    return Question(qid, TOUR_PAGE, text, keys, labels, answer, why, model, image)


def parts_who(model: str, sweep: dict, scheme: str) -> Question:
    """ "Which still names the true class more often?" for the chapter's parts step, on the test
    images both models get right with `scheme` applied (the step's bar chart), beyond chance or
    not as why.parts_words decides."""
    k = 1 + ("halves", "sides", "quadrants").index(scheme)
    n = sweep["both_right"]
    cnn, caps = sweep["cnn_right"][k], sweep["caps_right"][k]
    answer = ("cnn" if cnn > caps else "caps") if rules.beyond_chance(cnn, n, caps, n) else "same"
    qid = question_id("tour-parts", model, scheme, n, cnn, caps)
    keys, labels = shuffled(
        qid,
        [
            ("cnn", Words.t("The CNN")),
            ("caps", Words.t("The capsule network")),
            ("same", Words.t("Neither: the gap is within chance")),
        ],
    )
    why = Words.t(
        "The CNN still names the true class on {cnn}% of the {n} test images, the capsule network on {caps}%; chance alone moves such a gap by ±{band} points.",
        cnn=f"{cnn:.1f}",
        caps=f"{caps:.1f}",
        n=n,
        band=f"{rules.noise(cnn, n, caps, n):.1f}",
    )
    text = Words.t(
        "Swap the top and bottom halves of every test digit that both the CNN and the capsule network name correctly: all "
        "the parts are there, in the wrong places. Which will still name the true class more often?"
    )
    return Question(qid, TOUR_PAGE, text, keys, labels, answer, why, model)


def votes_together(model: str, sweep: dict, shift: float) -> Question:
    """ "What will the winning class's votes do when the digits move?" for the matrix chapter's
    viewpoint step (its chart of the votes' mean and spread), decided as why.viewpoint_words
    decides: together (rules.moves_together), their spread changing, or barely moving."""
    k = sweep["shift_values"].index(float(shift))
    move, s0, s1 = sweep["shift_mean_move"][k], sweep["shift_spread_before"][k], sweep["shift_spread_after"][k]
    if rules.moves_together(move, s0, s1):
        answer = "together"
    else:
        answer = "scatter" if rules.trend(s0, s1) != "stays about level" else "still"
    qid = question_id("tour-votes", model, shift, move, s0, s1)
    keys, labels = shuffled(
        qid,
        [
            ("together", Words.t("They move together: their mean moves, their spread stays")),
            ("scatter", Words.t("Their spread changes by more than a tenth: they scatter or gather")),
            ("still", Words.t("They barely move: their mean moves by less than a tenth of their spread")),
        ],
    )
    why = Words.t(
        "Their mean moves by {move} while their spread goes from {s0} to {s1} (averages over {n} test images).",
        move=f"{move:.3f}",
        s0=f"{s0:.3f}",
        s1=f"{s1:.3f}",
        n=sweep["images"],
    )
    text = Words.tn(
        "Move every test digit {n} pixel to the right. What will the votes for the winning class do?",
        "Move every test digit {n} pixels to the right. What will the votes for the winning class do?",
        int(shift),
    )
    return Question(qid, TOUR_PAGE, text, keys, labels, answer, why, model)


def coordinates_more(model: str, sweep: dict, shift: float) -> Question:
    """ "Will the mean pose's position move more with coordinate addition?" for the matrix
    chapter's coordinates step (its chart, with and without on the same weights), decided as
    why.viewpoint_words decides (rules.trend: within a tenth, about as much)."""
    k = sweep["shift_values"].index(float(shift))
    with_, without = sweep["shift_position_move"][k], sweep["shift_position_move_plain"][k]
    answer = "same" if rules.trend(without, with_) == "stays about level" else "more" if with_ > without else "less"
    qid = question_id("tour-coordinates", model, shift, with_, without)
    keys, labels = shuffled(
        qid,
        [
            ("more", Words.t("More with coordinate addition")),
            ("less", Words.t("Less with coordinate addition")),
            ("same", Words.t("About as much (within a tenth)")),
        ],
    )
    why = Words.t(
        "With coordinate addition the two position entries move by {with_}; without it, on the same weights, by {without}.",
        with_=f"{with_:.3f}",
        without=f"{without:.3f}",
    )
    text = Words.tn(
        "Coordinate addition adds to each vote where its part sits in the picture. Move every test digit {n} pixel to the right: "
        "will the mean pose's two position entries move more with it than without it?",
        "Coordinate addition adds to each vote where its part sits in the picture. Move every test digit {n} pixels to the right: "
        "will the mean pose's two position entries move more with it than without it?",
        int(shift),
    )
    return Question(qid, TOUR_PAGE, text, keys, labels, answer, why, model)


# -- the routing lab ------------------------------------------------------------------------------


def lab_gap(model: str, own, other, routing: Words) -> Question:
    """ "How will the test error with `routing` compare with the model's own?" for the lab step's
    bars: `own` and `other` are the lab's rows (capsviz.analysis.lab.Row) of its own routing and
    of `routing`, beyond chance or not as the step's sentence decides (rules.beyond_chance)."""
    gap = other.test_error - own.test_error
    beyond = rules.beyond_chance(other.test_error, other.n_test, own.test_error, own.n_test)
    answer = ("worse" if gap > 0 else "better") if beyond else "same"
    qid = question_id("tour-lab", model, other.run_with, own.test_error, other.test_error, own.n_test, other.n_test)
    keys, labels = shuffled(
        qid,
        [
            ("worse", Words.t("Worse, by more than chance gives")),
            ("same", Words.t("Within chance: no better, no worse")),
            ("better", Words.t("Better, by more than chance gives")),
        ],
    )
    why = Words.t(
        "Run with {routing}, it misclassifies {error}% of the test images, against {own}% with its own routing; chance alone moves such a gap by ±{band} points.",
        routing=routing,
        error=two(other.test_error),
        own=two(own.test_error),
        band=two(rules.noise(other.test_error, other.n_test, own.test_error, own.n_test)),
    )
    text = Words.t(
        "The routing lab ran this model on {n} test images with {routing} instead of its own routing, which misclassifies {own}% "
        "of them. How will its test error compare?",
        n=f"{other.n_test:,}",
        routing=routing,
        own=two(own.test_error),
    )
    return Question(qid, TOUR_PAGE, text, keys, labels, answer, why, model)


# -- where I stand --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Standing:
    """One question of the tour as the student left it: its step (from 1) and title, and whether
    they answered it in its current round (`answered`) and with which choice (None: skipped)."""

    step: int
    title: str
    question: Question
    answered: bool
    choice: str | None

    @property
    def status(self) -> str:
        """ "right", "wrong", "skipped" or "open" (not answered yet)."""
        if not self.answered:
            return "open"
        if self.choice is None:
            return "skipped"
        return "right" if self.choice == self.question.answer else "wrong"

    @property
    def missed(self) -> bool:
        return self.status != "right"

    def words(self) -> str:
        """The question's line in the summary, in the reader's language."""
        q = self.question
        v = dict(k=self.step, title=self.title, answer=q.label(q.answer))
        if self.status == "right":
            return t("Step {k} ({title}): right (“{answer}”).", **v)
        if self.status == "wrong":
            return t("Step {k} ({title}): you said “{mine}”; the answer is “{answer}”.", mine=q.label(self.choice), **v)
        if self.status == "skipped":
            return t("Step {k} ({title}): skipped; the answer is “{answer}”.", **v)
        return t("Step {k} ({title}): not answered yet.", **v)


def standing(asked: list[tuple[int, str, Question]], answers: dict[str, tuple[bool, str | None]]) -> list[Standing]:
    """The tour's questions (`asked`: step, title, question) with this student's `answers`
    (qid -> (answered, choice or None when skipped)), in the order of the steps."""
    return [Standing(k, title, q, *answers.get(q.qid, (False, None))) for k, title, q in sorted(asked, key=lambda x: x[0])]


def standing_words(rows: list[Standing]) -> str:
    """The summary's first sentence: how many of the tour's questions the student got right, and
    how many they skipped or left."""
    n = len(rows)
    if not n:
        return t("This tour asked no questions on this model and image.")
    right = sum(r.status == "right" for r in rows)
    left = sum(r.status in ("skipped", "open") for r in rows)
    if left:
        return tn(
            "You got {right} of {n} question right; {left} of them you skipped or have not answered yet.",
            "You got {right} of {n} questions right; {left} of them you skipped or have not answered yet.",
            n,
            right=right,
            left=left,
        )
    return tn("You got {right} of {n} question right.", "You got {right} of {n} questions right.", n, right=right)
