"""The questions the app asks before it shows the answer (capsviz.analysis.questions), for the static
site: the explorer's "which class capsule will be the longest?" and, for a MultiMNIST model, "how
many of the two digits will it name?", made by the app's own functions from the model's answer on
each of the site's first test images, in every language, with the verdict the app says for each
choice. The page asks them before it draws the answer and keeps a student's answers in that
browser only (web/js/asking.js); nothing is sent anywhere.
"""

from __future__ import annotations

import numpy as np
import torch

from capsviz.analysis import predict
from capsviz.analysis.questions import Question, both_digits, longest_capsule
from capsviz.i18n import LANGUAGES, speaking


def said(q: Question) -> dict:
    """A question in this run's language, as the page shows it: its text, its choices (keys, which
    answers are kept by, and labels), the right key, the one sentence the reveal says, and the
    verdict for each choice ("" for a skip)."""
    return {
        "qid": q.qid,
        "page": q.page,
        "text": str(q.text),
        "keys": list(q.keys),
        "labels": [str(label) for label in q.labels],
        "answer": q.answer,
        "why": str(q.why),
        "verdicts": {k: q.verdict(k) for k in q.keys} | {"": q.verdict(None)},
    }


@torch.no_grad()
def question(model, meta, path, image: np.ndarray, label) -> Question:
    """The explorer's question for one test image (H, W) or (C, H, W) in [0, 1], as the app's explorer
    and MultiMNIST pages ask it (pages/explorer.py, pages/multimnist.py), the model named by its file."""
    names = [str(c) for c in meta.class_names]
    p = predict(model, image)
    if meta.dataset == "multimnist":
        top2 = tuple(int(j) for j in np.argsort(-p.scores, kind="stable")[:2])  # the two longest capsules, as the page marks them
        return both_digits(path.name, image, top2, tuple(int(x) for x in label))
    return longest_capsule(path.name, image, p.scores, p.predicted, names, names[int(label)])


def questions_for(model, meta, path, images: np.ndarray, labels, n: int) -> dict[str, list[dict]]:
    """{lang: [the question of each of the first `n` test images (N, [C,] S, S) uint8]}."""
    cfg = model.config
    asked = []
    for k in range(min(n, len(images))):
        image = images[k].astype(np.float32).reshape(cfg.in_channels, cfg.in_size, cfg.in_size).squeeze(0) / 255
        asked.append(question(model, meta, path, image, labels[k]))
    out = {}
    for lang in LANGUAGES:
        with speaking(lang):
            out[lang] = [said(q) for q in asked]
    return out
