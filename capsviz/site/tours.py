"""The guided tour's words for the static site: each step's explanations exactly as the app's tour
writes them (capsviz.analysis.tour: the model family's walk over one image's trace), and the
question it asks before the step shows, in every language, for the site's first test images, with
the numbers of the app's own figure for the steps
whose figure the site cannot draw from its graphs alone (the predictions' grid, the arrows, the
routing and EM planes, the routing lab's bars).

The walk's sentences quote the trace's numbers, so they are written once per image here, where the
core runs; the site shows them beside the very figures they quote (web/js/views/tour.js). For a digit
drawn in the page, or a test image past these, the page writes the dynamic-routing CapsNet tour's
sentences itself from the numbers it computes (capsviz/site/said.py, web/js/said.js); the app's
figures, tables and questions that need the trace come only with these images.
"""

from __future__ import annotations

import numpy as np
import torch

from capsviz.analysis import lab
from capsviz.analysis.steps import two
from capsviz.analysis.tour import tour_of, walk
from capsviz.glossary import class_words
from capsviz.i18n import LANGUAGES, speaking, t
from capsviz.site.quiz import said

TOUR_IMAGES = 20  # test images explained: about 3.5 KB each a language gzipped, so a language's file stays near 70 KB
DIGITS = 6  # decimals kept of a figure's numbers: the page writes at most three, rounded as the sentences round them


def _numbers(x):
    """A figure's numbers as JSON: arrays as nested lists rounded to DIGITS, other values as they are."""
    if isinstance(x, np.ndarray | torch.Tensor):
        return np.round(np.asarray(x, dtype=np.float64), DIGITS).tolist()
    if isinstance(x, float | np.floating):
        return round(float(x), DIGITS)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, dict):
        return {str(k): _numbers(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_numbers(v) for v in x]
    return x


def _cell(v) -> str:
    """A table cell as the app's tour writes it (capsviz.viz.teach.markdown_table): three decimals for a number."""
    return f"{v:.3f}" if isinstance(v, float | np.floating) else str(v)


def _table(columns: dict | None) -> dict | None:
    """The step's table (column name -> values) as {columns, rows} of strings."""
    if not columns:
        return None
    names = list(columns)
    return {"columns": names, "rows": [[_cell(columns[c][r]) for c in names] for r in range(len(columns[names[0]]))]}


def _planes(trace, it: int, names: list[str], capsule: str, em: bool, fit: bool = True) -> dict:
    """The app's routing (or EM) figure of iteration `it` as numbers: the winner's and the runner-up's
    planes (capsviz.viz.animation's tour frames), the six followed lower capsules in each, with the
    frame's words as the app writes them (the same messages)."""
    pair = [trace.winner, trace.runner_up]
    first, second = names[pair[0]], names[pair[1]]
    shown = [f"{k + 1}: {n}" for k, n in enumerate(trace.shown_names)]
    if em:
        if fit:
            title = t(
                "EM iteration {k} of {T} (lambda = {lam}): the six most active lower capsules",
                k=it + 1,
                T=trace.iterations,
                lam=f"{trace.lambdas[it]:.2f}",
            )
            note = ""  # the step's caption says what the figure draws
            uppers = [t("class capsule {name}", name=names[j]) for j in pair]
        else:
            title = t("Votes of the six most active lower capsules, before routing")
            note = t(
                "assignment R to {first} (blue) and {second} (orange): equal for every class before routing", first=first, second=second
            )
            uppers = [t("votes for class capsule {name}", name=names[j]) for j in pair]
        return {
            "title": title,
            "note": note,
            "uppers": uppers,
            "points": trace.votes2d[pair],  # (2, SHOWN, 2) votes
            "weights": trace.R[it][trace.shown][:, pair].T,  # (2, SHOWN) assignments R
            "mu": trace.mu2d[it, pair],
            "sigma": trace.sigma2d[it, pair],
            "a": [two(x) for x in trace.a[it, pair]],  # as the sentences write them
            "spread": [[two(x) for x in trace.sigma2d[it, j]] for j in pair],
            "shown": shown,
            "fit": fit,
        }
    return {
        "title": t(
            "Routing iteration {k} of {T}: the six loudest predictions for {name}", k=it + 1, T=trace.iterations, name=names[trace.winner]
        ),
        "note": t(
            "coupling c to {first} (blue) and {second} (orange); the other {capsule}s take the rest",
            first=first,
            second=second,
            capsule=capsule,
        ),
        "uppers": [t("{capsule} {name}", capsule=capsule, name=names[j]) for j in pair],
        "points": trace.pred2d[pair],  # (2, SHOWN, 2) predictions u_hat
        "weights": trace.c[it][trace.shown][:, pair].T,  # (2, SHOWN) couplings c
        "s": trace.s2d[it, pair],
        "v": trace.v2d[it, pair],
        "s_len": [two(x) for x in trace.s_len[it, pair]],  # as the sentences write them (steps.squash_words)
        "v_len": [two(x) for x in trace.v_len[it, pair]],
        "shown": shown,
    }


def _figure(step, trace, names: list[str], capsule: str) -> dict | None:
    """The numbers of the app's figure for a step whose figure the site draws from them, else None
    (the input, the feature maps and the reconstruction the site draws from its own graphs)."""
    d = step.data
    if step.figure == "arrows":
        return {"lengths": d["lengths"], "directions": d["directions"]}
    if step.figure == "grid":
        keep = ("values", "rows", "columns", "title", "highlight", "highlight_row")
        return {k: d[k] for k in keep if k in d}
    if step.figure == "bars":
        keep = ("values", "names", "highlight", "title", "axis", "lines", "label")
        return {k: d[k] for k in keep if k in d}
    if step.figure == "lab":
        keep = ("routings", "routing_names", "error", "spread", "n_test", "pairs", "pair_spread", "n_pairs")
        return {k: d[k] for k in keep if k in d}
    if step.figure == "em_primary":
        return {"maps": d["maps"], "pose": d["pose"]}
    if step.figure == "routing":
        return _planes(trace, d["t"], names, capsule, em=False)
    if step.figure in ("em", "votes"):
        return _planes(trace, d.get("t", 0), names, capsule, em=True, fit=step.figure == "em")
    return None


def _step(step, trace, names: list[str], capsule: str) -> dict:
    figure = _figure(step, trace, names, capsule)
    return {
        "key": step.key,
        "text": list(step.text),
        "measured": step.measured,
        "warn": bool(step.warn),
        "table": _table(step.table),
        "terms": list(step.terms),
        "figure": step.figure if figure is not None else "",
        "caption": step.caption if figure is not None else "",
        "data": _numbers(figure) if figure is not None else None,
        # what the student predicts before the step shows (capsviz.analysis.tour_questions), in this language
        "question": said(step.question) if step.question is not None else None,
    }


def lab_rows(path, meta) -> list:
    """The routing lab's stored rows for this model, as the app's tour reads them (pages/tour.py)."""
    if not lab.fits(meta.config):
        return []
    have = lab.stored_rows([(path, meta)], list(lab.LAB_ROUTINGS))
    return [have[path.stem, r] for r in lab.LAB_ROUTINGS if (path.stem, r) in have]


def explained(meta) -> bool:
    """Whether the site explains this model's tour: one with a tour, on single images (a MultiMNIST
    model's site images are pairs, which the app's tour does not follow)."""
    return tour_of(meta.config) is not None and meta.dataset != "multimnist"


def tour_words(model, meta, path, images: np.ndarray, labels, n: int = TOUR_IMAGES) -> dict[str, list]:
    """For each language, the tour of each of the first `n` test `images` (N, [C,] S, S) uint8, as
    lists of steps (_step): {lang: [image -> [step]]}."""
    cfg = model.config
    tour = tour_of(cfg)
    names = [str(c) for c in meta.class_names]
    rows = lab_rows(path, meta)
    shown = [
        images[k].astype(np.float32).reshape(cfg.in_channels, cfg.in_size, cfg.in_size).squeeze(0) / 255 for k in range(min(n, len(images)))
    ]
    out = {}
    for lang in LANGUAGES:
        with speaking(lang):
            traces = [tour.follow(model, image) for image in shown]  # a trace names its capsules in the reader's language
            words = class_words(meta)
            looks = (
                t("the {size}x{size} input, red, green and blue levels 0 to 1", size=cfg.in_size)
                if cfg.in_channels == 3
                else t("the {size}x{size} input, grey levels 0 to 1", size=cfg.in_size)
            )
            out[lang] = [
                [
                    _step(s, trace, names, words.capsule)
                    for s in walk(trace, names, words, path.stem, names[int(labels[k])], looks, rows, cfg)
                ]
                for k, trace in enumerate(traces)
            ]
    return out
