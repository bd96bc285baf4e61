"""Questions a student answers before the figure that answers them is shown (predict, then see).

Each question is generated from what the page is about to show: the real model's prediction for
the real image, the playground's own numbers and settings. Its right answer is computed here from
the same object the page's figure is drawn from (the `Prediction` whose lengths the explorer's bar
chart shows; the toy whose couplings the playground's figure and table show), with the same rules
the page's sentences use (capsviz.analysis.rules), and never stored in advance. The wrong choices
are the answers a student could reasonably give: the runner-up capsules, the other upper
capsules, "near uniform"; their order is shuffled by the question's own id, so the right one is
not always first, yet every student of a class sees the same order.

A question's `qid` names what it asks about (its kind, the model, the image or the toy's numbers,
the settings), so every student who looks at the same thing answers the same question, and the
Teacher page counts them together (capsviz.store).

Students of one class read in different languages, so a question holds no words: its text, its
choices and its reason are `Words`, a catalog message with its values, said in the reader's
language where shown. The class's store keeps them so (`Words.dump`), and the choices' keys, never
their words, are what answers and splits count: a question answered in Japanese is the same
question, with the same split, for a student who reads Chinese.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field

import numpy as np

from capsviz.analysis import coupling_entropy, rules
from capsviz.i18n import t, tn


def two(x: float) -> str:
    """A number as the tour's figures and its questions write it: two decimals."""
    return f"{x:.2f}"


UNIFORM = "uniform"  # the key of "still near uniform"
MOST_CHOICES = 4  # the right answer and up to three others: more is a list to read, not a question


@dataclass(frozen=True)
class Words:
    """A sentence kept as its catalog message and values, said in the reader's language wherever it
    is shown (`str(words)`): `Words.t("...", x=...)` and `Words.tn(singular, plural, n, ...)` are
    written as `t` and `tn` are, and the catalog finds their messages the same way. A value may be
    Words itself (a routing's name inside a sentence): it is said in the reader's language too."""

    message: str
    plural: str | None = None
    n: int | None = None
    values: tuple[tuple[str, str | int | float | Words], ...] = ()
    literal: bool = False  # a name shown as it is in every language (a class's name), no message

    @classmethod
    def as_is(cls, text: str) -> Words:
        return cls(str(text), literal=True)

    @classmethod
    def t(cls, message: str, /, **values) -> Words:
        return cls(message, values=_kept(values))

    @classmethod
    def tn(cls, singular: str, plural: str, n: int, /, **values) -> Words:
        return cls(singular, plural, int(n), _kept(values))

    def __str__(self) -> str:
        if self.literal:
            return self.message
        values = {k: str(v) if isinstance(v, Words) else v for k, v in self.values}
        if self.plural is not None:
            return tn(self.message, self.plural, self.n, **values)
        return t(self.message, **values) if values else t(self.message)

    def kept(self) -> dict:
        """As JSON keeps it: no words of any one language."""
        if self.literal:
            return {"s": self.message}
        return {"m": self.message, "p": self.plural, "n": self.n, "v": {k: v.kept() if isinstance(v, Words) else v for k, v in self.values}}

    def dump(self) -> str:
        """As the class's store keeps it: JSON, no words of any one language."""
        return json.dumps(self.kept(), ensure_ascii=False)

    @classmethod
    def from_kept(cls, kept: dict) -> Words:
        """What `kept` made."""
        if "s" in kept:
            return cls.as_is(kept["s"])
        n = kept.get("n")
        values = {k: cls.from_kept(v) if isinstance(v, dict) else v for k, v in (kept.get("v") or {}).items()}
        return cls(str(kept["m"]), kept.get("p"), None if n is None else int(n), _kept(values))

    @classmethod
    def load(cls, text: str) -> Words:
        """What `dump` wrote; a row of words from before (plain text) is shown as it was."""
        try:
            return cls.from_kept(json.loads(text))
        except (ValueError, TypeError, KeyError, AttributeError):
            return cls.as_is(text)


def _kept(values: dict) -> tuple[tuple[str, str | int | float | Words], ...]:
    """A message's values as a Words keeps them: numbers as numbers, Words as Words, anything else as its text."""

    def one(v):
        if isinstance(v, np.generic):
            return v.item()
        return v if isinstance(v, int | float | Words) else str(v)

    return tuple(sorted((str(k), one(v)) for k, v in values.items()))


def said(dumped: str) -> str:
    """Words kept in the class's store (`Words.dump`), in the reader's language."""
    return str(Words.load(dumped))


@dataclass(frozen=True)
class Question:
    """What the page asks, the choices (`keys`, stored with answers; `labels`, shown), the right
    choice's key, and `why`: the one sentence the reveal says. Its words are `Words`: `str()` says
    them in the reader's language."""

    qid: str
    page: str
    text: Words
    keys: tuple[str, ...]
    labels: tuple[Words, ...]
    answer: str
    why: Words
    model: str = ""  # the model it asks about, for the Teacher page ("" for a toy of the playground)
    picture: np.ndarray | None = field(default=None, compare=False, repr=False)  # the image it asks about, (H, W) or (C, H, W) in [0, 1]

    def model_name(self) -> str:
        """The model it asks about as the sidebar names it: a checkpoint's stem, without the folder
        and the time a page's cache key adds (pages.active.model_key)."""
        if not self.model:
            return ""
        path = self.model.rsplit(":", 1)[0] if self.model.rsplit(":", 1)[-1].replace(".", "").isdigit() else self.model
        return path.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".safetensors")

    def label(self, key: str) -> str:
        """The choice `key` in the reader's language."""
        return str(self.labels[self.keys.index(key)]) if key in self.keys else key

    def kept(self) -> tuple[str, tuple[str, ...]]:
        """(its text, its choices' labels) as the class's store keeps them: in no one language."""
        return self.text.dump(), tuple(w.dump() for w in self.labels)

    def verdict(self, choice: str | None) -> str:
        """One sentence for the student after they commit (or skip): right, or what the answer was."""
        if choice is None:
            return t("You skipped this one. The answer: “{answer}”.", answer=self.label(self.answer))
        if choice == self.answer:
            return t("Right: “{answer}”.", answer=self.label(self.answer))
        return t("Not this time: you said “{mine}”; the answer is “{answer}”.", mine=self.label(choice), answer=self.label(self.answer))


def question_id(kind: str, *parts) -> str:
    """A question's id: its kind and a digest of what it is about (arrays by their bytes, the rest by repr)."""
    h = hashlib.sha256(kind.encode())
    for p in parts:
        h.update(b"\0")
        h.update(p.tobytes() if isinstance(p, np.ndarray) else repr(p).encode())
    return f"{kind}:{h.hexdigest()[:16]}"


def shuffled(qid: str, pairs: list[tuple[str, Words]]) -> tuple[tuple[str, ...], tuple[Words, ...]]:
    """The choices in an order drawn from the question's id: the same for every student."""
    order = list(pairs)
    random.Random(qid).shuffle(order)
    return tuple(k for k, _ in order), tuple(v for _, v in order)


# -- the DigitCaps explorer: which class capsule is longest -------------------------------------------


def class_choices(qid: str, values: np.ndarray, winner: int, names, label: str | None = None) -> tuple[tuple[str, ...], tuple[Words, ...]]:
    """The choices of a "which class" question about `values` (J,), whose answer is `winner`: it
    and the runner-ups, which the model itself finds most alike, and the image's `label` where the
    model gets it wrong (the answer a student most likely gives), in the question's own order."""
    order = [winner] + [int(j) for j in np.argsort(-np.asarray(values, dtype=np.float64), kind="stable") if int(j) != winner]
    picked = order[:MOST_CHOICES]
    if label is not None and label in names:
        k = list(names).index(label)
        if k not in picked:
            picked[-1] = k
    return shuffled(qid, [(str(j), Words.as_is(names[j])) for j in picked])


def runner_up(values: np.ndarray, winner: int) -> int:
    """The class after `winner` in `values` (J,), largest first."""
    return next((int(j) for j in np.argsort(-np.asarray(values, dtype=np.float64), kind="stable") if int(j) != winner), winner)


def longest_capsule(
    model_key: str, image: np.ndarray, scores: np.ndarray, predicted: int, names, label: str | None = None, page: str = "explorer"
) -> Question:
    """ "Which class capsule will be longest?" for the model's `scores` (the capsules' lengths, the
    explorer's bar chart, the tour's lengths step) on `image`, asked on `page`. The other choices
    are the runner-up capsules and the image's label (class_choices)."""
    scores = np.asarray(scores, dtype=np.float64)
    qid = question_id(
        "longest", model_key, np.ascontiguousarray(image, dtype=np.float32), len(names), *(() if page == "explorer" else (page,))
    )
    winner = int(predicted)  # the chart's "Prediction:", from the same scores
    keys, labels = class_choices(qid, scores, winner, names, label)
    second = runner_up(scores, winner)
    why = Words.t(
        "The {name} capsule is the longest, at {length}; the next longest is {other}, at {other_length}.",
        name=names[winner],
        length=f"{scores[winner]:.2f}",
        other=names[second],
        other_length=f"{scores[second]:.2f}",
    )
    return Question(
        qid,
        page,
        Words.t("This image goes through the model. Which class capsule will be the longest (the model's answer)?"),
        keys,
        labels,
        str(winner),
        why,
        model_key,
        image,
    )


def strongest_dimension(model_key: str, image: np.ndarray, capsule: int, name: str, effect: np.ndarray) -> Question:
    """ "Which of these dimensions changes the drawing most?" for the explorer's perturbation grid of
    `capsule`: `effect` is the grid's measured change per dimension (capsviz.analysis.dimension_effect,
    the bar chart beside the grid). The choices: the dimension that changes it most, one from the
    middle and the one that changes it least, so the answer is not the only one that moves."""
    effect = np.asarray(effect, dtype=np.float64)
    order = [int(d) for d in np.argsort(-effect, kind="stable")]
    picked = list(dict.fromkeys([order[0], order[len(order) // 2], order[-1]]))
    qid = question_id("dimension", model_key, np.ascontiguousarray(image, dtype=np.float32), capsule)
    keys, labels = shuffled(qid, [(str(d), Words.t("dimension d{d}", d=d)) for d in picked])
    low = picked[-1]
    why = Words.t(
        "Moving d{d} from one end of its range to the other changes each pixel by {change} on average; d{low}, by {low_change}.",
        d=order[0],
        change=f"{effect[order[0]]:.3f}",
        low=low,
        low_change=f"{effect[low]:.3f}",
    )
    text = Words.t("Which of these dimensions of the {name} capsule changes the drawing most when it is moved across its range?", name=name)
    return Question(qid, "explorer", text, keys, labels, str(order[0]), why, model_key, image)


def both_digits(model_key: str, image: np.ndarray, top2, labels) -> Question:
    """ "How many of the two digits will the model name?" for a MultiMNIST pair: `top2`, its two
    longest capsules (capsviz.analysis.multimnist's segment, which the page's bar chart marks),
    against the pair's two `labels` (the paper's rule: right when the labels are the two longest)."""
    named = len({str(x) for x in top2} & {str(x) for x in labels})
    qid = question_id("pair", model_key, np.ascontiguousarray(image, dtype=np.float32))
    pairs = [("2", Words.t("Both digits")), ("1", Words.t("One of the two")), ("0", Words.t("Neither"))]
    keys, labels_ = shuffled(qid, pairs)
    why = Words.t(
        "Its two longest capsules are {a} and {b}; the digits are {first} and {second}.",
        a=top2[0],
        b=top2[1],
        first=labels[0],
        second=labels[1],
    )
    text = Words.t("Two digits overlap in this image. How many of them will the model name as its two longest capsules?")
    return Question(qid, "multimnist", text, keys, labels_, str(named), why, model_key, image)


# -- the routing playground: where a lower capsule's prediction goes ----------------------------------


def split_of(c: np.ndarray) -> str:
    """Where a lower capsule sends its prediction, couplings c (J,): UNIFORM when near uniform by
    the rule the playground's sentence uses (capsviz.analysis.playground.split_words), else the
    upper capsule (its number, from 1) with the largest coupling."""
    c = np.asarray(c, dtype=np.float64)
    J = len(c)
    ratio = float(coupling_entropy(c)) / np.log(J)
    if rules.near_uniform(ratio, float(c.max()), 1.0 / J):
        return UNIFORM
    return str(int(c.argmax()) + 1)


def routed_split(toy, lower: int, settings: tuple, attention: bool = False) -> Question:
    """ "After T iterations, where will lower capsule k send its prediction?" for the playground's
    dynamic (or self-attention) toy: the couplings of its last iteration, as its figure and table
    show them. Choices: each upper capsule, and "still near uniform"."""
    c = np.asarray(toy.c)  # (T, I, J)
    T, _, J = c.shape
    qid = question_id("split", settings, np.ascontiguousarray(toy.u_hat), lower)
    answer = split_of(c[-1, lower])
    pairs = [(str(j + 1), Words.t("Most of it to upper capsule {j}", j=j + 1)) for j in range(J)]
    pairs.append((UNIFORM, Words.t("Still split about evenly (near uniform)")))
    keys, labels = shuffled(qid, pairs)
    share = f"{c[-1, lower].max():.2f}"
    if answer == UNIFORM:
        why = Words.t(
            "Its largest coupling is {share}, against the uniform {uniform}: its predictions agree with no output more than with the others.",
            share=share,
            uniform=f"{1 / J:.2f}",
        )
    else:
        why = Words.t(
            "Its coupling to upper capsule {j} is {share}, against the uniform {uniform}: its prediction agrees with that output most.",
            j=answer,
            share=share,
            uniform=f"{1 / J:.2f}",
        )
    if attention:
        text = Words.t("Self-attention routing runs once. Where will lower capsule {k} send its prediction?", k=lower + 1)
    else:
        text = Words.tn(
            "After {n} iteration of routing by agreement, where will lower capsule {k} send its prediction?",
            "After {n} iterations of routing by agreement, where will lower capsule {k} send its prediction?",
            T,
            k=lower + 1,
        )
    return Question(qid, "playground", text, keys, labels, answer, why)


def em_assignment(toy, lower: int, settings: tuple) -> Question:
    """ "Will EM give lower capsule k's vote to one upper capsule?" for the playground's EM toy: the
    assignments R of its last iteration, as its figure and table show them."""
    R = np.asarray(toy.R)  # (T, I, J)
    T, _, J = R.shape
    qid = question_id("em", settings, np.ascontiguousarray(toy.votes), np.ascontiguousarray(toy.a_in), lower)
    answer = split_of(R[-1, lower])
    pairs = [(str(j + 1), Words.t("Mostly to upper capsule {j}", j=j + 1)) for j in range(J)]
    pairs.append((UNIFORM, Words.t("Still shared about evenly (near uniform)")))
    keys, labels = shuffled(qid, pairs)
    share = f"{R[-1, lower].max():.2f}"
    if answer == UNIFORM:
        why = Words.t(
            "Its largest assignment is {share}, against the uniform {uniform}: no Gaussian explains its vote much better.",
            share=share,
            uniform=f"{1 / J:.2f}",
        )
    else:
        why = Words.t(
            "Its assignment to upper capsule {j} is {share}, against the uniform {uniform}: that Gaussian explains its vote best.",
            j=answer,
            share=share,
            uniform=f"{1 / J:.2f}",
        )
    text = Words.tn(
        "After {n} iteration of EM routing, which upper capsule will lower capsule {k}'s vote be assigned to?",
        "After {n} iterations of EM routing, which upper capsule will lower capsule {k}'s vote be assigned to?",
        T,
        k=lower + 1,
    )
    return Question(qid, "playground", text, keys, labels, answer, why)


def uniform_changes_winner(toy, settings: tuple) -> Question:
    """ "Would uniform couplings (no routing) make another upper capsule the longest?" for the
    dynamic toy: the longest output |v| at iteration 1 (uniform couplings) against the last one."""
    v = np.linalg.norm(np.asarray(toy.v), axis=-1)  # (T, J)
    first, last = int(v[0].argmax()), int(v[-1].argmax())
    qid = question_id("uniform", settings, np.ascontiguousarray(toy.u_hat))
    answer = "same" if first == last else "other"
    keys, labels = shuffled(
        qid,
        [
            ("same", Words.t("No: the same upper capsule is the longest either way")),
            ("other", Words.t("Yes: with uniform couplings another upper capsule would be the longest")),
        ],
    )
    why = Words.t(
        "With uniform couplings upper capsule {first} is the longest ({first_length}); after routing, upper capsule {last} ({last_length}).",
        first=first + 1,
        first_length=f"{v[0, first]:.2f}",
        last=last + 1,
        last_length=f"{v[-1, last]:.2f}",
    )
    return Question(
        qid,
        "playground",
        Words.t("Would uniform couplings (no routing) change which upper capsule is the longest?"),
        keys,
        labels,
        answer,
        why,
    )


def split_words(counts: dict[str, int], labels: dict[str, str]) -> str:
    """The class's split in one sentence, for the Teacher page and a student after the reveal."""
    n = sum(counts.values())
    if not n:
        return t("Nobody has answered yet.")
    parts = "; ".join(t("{label}: {count}", label=labels.get(k, k), count=c) for k, c in counts.items())
    return tn("{n} student answered. {parts}.", "{n} students answered. {parts}.", n, parts=parts)


CSV_COLUMNS = ("question", "page", "model", "text", "student", "round", "answer", "correct", "reason", "answered_at")


def answers_csv(rows, label) -> str:
    """The class's answers as CSV (capsviz.store.Store.answer_rows), each question's text in the
    reader's language, each student by the anonymous
    `label` of their identity (capsviz.access.label), never the identity itself. A cell that a
    spreadsheet would run as a formula (=, +, -, @ first) is written with a ' before it."""
    import csv
    import io
    from datetime import UTC, datetime

    def cell(value) -> str:
        text = str(value)
        return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text

    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(CSV_COLUMNS)
    for qid, page, model, text, who, rnd, choice, correct, reason, at in rows:
        when = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M:%S")
        writer.writerow([cell(x) for x in (qid, page, model, said(text), label(who), rnd, choice, int(correct), reason, when)])
    return out.getvalue()
