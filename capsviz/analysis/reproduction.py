"""The papers' result tables, filled from the checkpoints' own metadata beside the published numbers."""

from __future__ import annotations

import re
from dataclasses import dataclass

from capsviz.analysis import rules
from capsviz.config import preset
from capsviz.i18n import N_, t, tn
from capsviz.registry import FAMILIES
from capsviz.schema import CheckpointMeta
from capsviz.text import plain

# Published test errors (%): (family, dataset, routing iterations, reconstruction), from each family's entry
PAPER = {(name, *k): err for name, f in FAMILIES.items() for k, err in f.paper.items()}

# Table 1 of Sabour et al.: (method, family, routing iterations, reconstruction)
TABLE1_ROWS = [
    (N_("baseline CNN"), "cnn", None, None),
    ("CapsNet", "capsnet", 1, False),
    ("CapsNet", "capsnet", 1, True),
    ("CapsNet", "capsnet", 3, False),
    ("CapsNet", "capsnet", 3, True),
]
TABLE1_DATASETS = ("mnist", "multimnist")
# Each dataset by the name its papers write (the same in every language)
DATASET_NAMES = {"mnist": "MNIST", "multimnist": "MultiMNIST", "smallnorb": "smallNORB"}

# Hinton et al.: (dataset, model, test error %); smallNORB training is not part of capsviz yet
EM_RESULTS = [
    ("smallnorb", N_("matrix capsules, EM routing (A=B=C=D=32)"), 1.8),
    ("smallnorb", N_("matrix capsules, small (A=64, B=8, C=D=16)"), 2.2),
    ("smallnorb", N_("baseline CNN (4.2M parameters)"), 5.2),
    ("mnist", N_("matrix capsules, EM routing"), 0.44),
]


def _key(meta: CheckpointMeta) -> tuple:
    c = meta.config
    return (
        c.family,
        meta.dataset,
        getattr(c, "routing_iterations", None),  # Efficient-CapsNet routes in one pass
        c.reconstruction if "reconstruction" in c.run_options else None,
    )


def paper_error(meta: CheckpointMeta) -> float | None:
    """The paper's test error for a model like this one, None where the papers give none: also for a
    CapsNet trained with other couplings than the paper's routing (uniform, random, ...)."""
    if getattr(meta.config, "couplings", None) not in (None, meta.config.routing):
        return None
    return PAPER.get(_key(meta))


def is_paper_size(meta: CheckpointMeta) -> bool:
    """True when the checkpoint has the size the paper's figure is for (not a smaller preset)."""
    c = meta.config
    name = FAMILIES[c.family].paper_preset(meta.image_dataset)  # the family's entry says which preset is its paper's model
    if name is None:
        return False
    ref = preset(name, in_size=c.in_size, num_classes=c.num_classes)
    keep = {"routing_iterations", "reconstruction", "coord_add", "final_lambda", "dropout"}
    return all(getattr(c, k) == getattr(ref, k) for k in vars(ref) if k not in keep)


@dataclass
class Cell:
    paper: float | None  # the published test error, %
    ours: float | None  # the best matching checkpoint's measured test error, %
    checkpoint: str | None  # its file name
    how: str  # how ours was measured, or the command that would fill the cell
    paper_size: bool  # ours has the paper's architecture (False: a smaller preset)
    n_test: int | None = None  # how many test images ours was measured on


def _command(family: str, dataset: str, iterations, reconstruction) -> str:
    """The command that would train the paper's model of `family` for a cell of Table 1."""
    model = FAMILIES[family].paper_preset(dataset)
    if iterations is None:
        return f"python -m capsviz train --model {model} --dataset {dataset} --out checkpoints/{model}.safetensors"
    name = f"{family}-{dataset}-r{iterations}{'' if reconstruction else '-norecon'}"
    flags = f" --routing-iterations {iterations}" + ("" if reconstruction else " --no-reconstruction")
    return f"python -m capsviz train --model {model} --dataset {dataset}{flags} --out checkpoints/{name}.safetensors"


def table1(found: list[tuple[str, CheckpointMeta]]) -> list[dict]:
    """Rows of Table 1 (Sabour et al.): for each (method, routing, reconstruction) and dataset, the
    paper's error and the lowest measured error among matching checkpoints (paper-size ones first).
    found: (file name, metadata) pairs."""
    rows = []
    for method, fam, it, rec in TABLE1_ROWS:
        row = {"method": method, "routing": it, "reconstruction": rec, "cells": {}}
        for ds in TABLE1_DATASETS:
            best = None
            for name, meta in found:
                err = meta.metrics.test_error
                matches = _key(meta) == (fam, ds, it, rec) and err is not None
                full = matches and is_paper_size(meta)
                if matches and (best is None or (full, -err) > (best[0], -best[1])):
                    best = (full, err, name, meta.metrics.how, meta.metrics.n_test)
            paper = PAPER.get((fam, ds, it, rec))
            if best is None:
                row["cells"][ds] = Cell(paper, None, None, _command(fam, ds, it, rec), False)
            else:
                row["cells"][ds] = Cell(paper, best[1], best[2], best[3], best[0], best[4])
        rows.append(row)
    return rows


# Test images behind each published number: MNIST's test split; the paper's MultiMNIST test set of
# 10M pairs (1000 per test digit, Sabour et al. 6.1); smallNORB's test split of 24,300 images.
PAPER_N = {"mnist": 10_000, "multimnist": 10_000_000, "smallnorb": 24_300}


def ours_text(err: float) -> str:
    """How the tables and the sentences write a measured error (%)."""
    return f"{err:.2f}"


def paper_text(err: float) -> str:
    """How the tables and the sentences write a published error (%), as the paper gives it."""
    return f"{err:g}"


@dataclass
class Gap:
    """Our error beside the paper's, each on its own test images: how far apart and whether beyond chance
    (capsviz.analysis.rules.beyond_chance)."""

    ours: float
    n_ours: int | None
    paper: float
    n_paper: int
    paper_size: bool

    @property
    def noise(self) -> float | None:
        return None if not self.n_ours else rules.noise(self.ours, self.n_ours, self.paper, self.n_paper)

    @property
    def beyond(self) -> bool | None:
        return None if not self.n_ours else rules.beyond_chance(self.ours, self.n_ours, self.paper, self.n_paper)

    def words(self) -> str:
        """Two or three sentences: how far ours is from the paper's, whether chance could make that
        gap, and whether the checkpoint is smaller than the paper's model."""
        gap = abs(round(self.ours, 2) - self.paper)
        v = dict(ours=ours_text(self.ours), paper=paper_text(self.paper), gap=f"{gap:.2f}")
        if gap < 0.005:
            said = t("ours {ours}% against the paper's {paper}%: the same to two decimals.", **v)
        elif round(self.ours, 2) > self.paper:
            said = t("ours {ours}% against the paper's {paper}%: {gap} points above it.", **v)
        else:
            said = t("ours {ours}% against the paper's {paper}%: {gap} points below it.", **v)
        v = dict(n=f"{self.n_ours or 0:,}", n_paper=f"{self.n_paper:,}", band=f"{self.noise or 0:.2f}")
        if self.n_ours is None:
            chance = t("The checkpoint does not record how many test images it was measured on, so chance cannot be ruled out.")
        elif self.beyond:
            chance = t(
                "The gap is beyond chance: {n} test images here and {n_paper} in the paper give gaps up to {band} points by chance alone.",
                **v,
            )
        else:
            chance = t(
                "The gap is within chance: {n} test images here and {n_paper} in the paper give gaps up to {band} points by chance "
                "alone, so these test sets cannot tell the two apart.",
                **v,
            )
        said = t("{said} {more}", said=said, more=chance)
        if not self.paper_size:
            said = t("{said} {more}", said=said, more=t("This checkpoint is smaller than the paper's model."))
        return said


def cell_gap(cell: Cell, dataset: str) -> Gap | None:
    if cell.ours is None or cell.paper is None:
        return None
    return Gap(cell.ours, cell.n_test, cell.paper, PAPER_N[dataset], cell.paper_size)


@dataclass
class Tables:
    """What the Reproduction page shows: each table as Markdown, the numbered notes on how each of our
    numbers was measured, one sentence per number we can set beside the paper's (`gaps`, with the Gap
    it comes from), and the commands that would fill the empty cells."""

    table1: str
    em: str
    notes: list[str]
    gaps: list[tuple[str, Gap]]
    todo: list[str]


def _code(name: str) -> str:
    """A file name as a code span in a Markdown table: plain, its pipes escaped (GFM reads them inside spans too)."""
    return f"`{plain(name, 'code')}`".replace("|", "\\|")


def tables(found: list[tuple[str, CheckpointMeta]]) -> Tables:
    """The page's tables, notes and sentences; every file name and note from a checkpoint made plain here."""
    notes, todo, gaps = [], [], []

    def fmt(cell: Cell, where: str, dataset: str) -> str:
        if cell.ours is None:
            if cell.paper is not None:
                todo.append(cell.how)
            return "·" if cell.paper is not None else "-"
        # the note is the checkpoint's own record, shown as it is stored (in English)
        notes.append(t("{file}, as its file records it: {how}", file=_code(cell.checkpoint), how=_code(cell.how)))
        if gap := cell_gap(cell, dataset):
            gaps.append((f"({len(notes)}) {where}", gap))
        return f"**{ours_text(cell.ours)}**{'' if cell.paper_size else ' †'} ({len(notes)})"

    head = [t("method"), t("routing iterations"), t("reconstruction")]
    for d in TABLE1_DATASETS:
        head += [t("{dataset} ours", dataset=DATASET_NAMES[d]), t("{dataset} paper", dataset=DATASET_NAMES[d])]
    table = "| " + " | ".join(map(_unbroken, head)) + " |\n|---|---|---|---|---|---|---|\n"
    for r in table1(found):
        routing = "-" if r["routing"] is None else str(r["routing"])
        rec = "-" if r["reconstruction"] is None else (t("yes") if r["reconstruction"] else t("no"))
        what = _method_words(r["method"], r["routing"], r["reconstruction"])
        cells = []
        for ds in TABLE1_DATASETS:
            c = r["cells"][ds]
            where = t("{method}, {dataset}", method=what, dataset=DATASET_NAMES[ds])
            cells += [fmt(c, where, ds), "-" if c.paper is None else paper_text(c.paper)]
        table += f"| {_unbroken(t(r['method']))} | {routing} | {rec} | {' | '.join(cells)} |\n"

    em = "| " + " | ".join(map(_unbroken, [t("dataset"), t("model"), t("paper"), t("ours")])) + " |\n|---|---|---|---|\n"
    matrix = [(n, m) for n, m in found if m.config.routing == "em" and m.metrics.measured]
    for ds, model, err in EM_RESULTS:
        ours = []
        for n, m in matrix:
            if m.dataset == ds:
                ours.append(f"{ours_text(m.metrics.test_error)}{'' if is_paper_size(m) else ' †'} ({_code(n)})")
                gap = Gap(m.metrics.test_error, m.metrics.n_test, err, PAPER_N[ds], is_paper_size(m))
                where = t("Hinton et al., {model}, {dataset}: {file}", model=t(model), dataset=DATASET_NAMES[ds], file=_code(n))
                gaps.append((where, gap))
        if not ours:
            ours = (
                ["· `python -m capsviz train --model matrix-small --dataset mnist --out checkpoints/matrix-small-mnist.safetensors`"]
                if ds == "mnist"
                else [t("not reproducible in capsviz yet: smallNORB is readable (`python -m capsviz data`) but not a training dataset")]
            )
        em += f"| {DATASET_NAMES[ds]} | {_unbroken(t(model))} | {paper_text(err)} | {t('; ').join(ours)} |\n"
    return Tables(table, em, notes, gaps, todo)


WORD_JOINER = "\u2060"  # Unicode's mark for "no line break here", invisible
CJK = re.compile(r"(?<=[\u3000-\u30ff\u3400-\u9fff\uff00-\uffef])(?=[\u3000-\u30ff\u3400-\u9fff\uff00-\uffef])")


def _unbroken(words: str) -> str:
    """A header's or a row's name whose Chinese or Japanese words stay whole on a narrow screen: a
    browser may break a line between any two of their characters, and a table too wide for a phone
    squeezes such a column to one character a line. It breaks at spaces only."""
    return CJK.sub(WORD_JOINER, words)


def _method_words(method: str, iterations: int | None, reconstruction: bool | None) -> str:
    """A row of Table 1 in words: "CapsNet, 3 iterations, with reconstruction"."""
    if iterations is None or reconstruction is None:
        return t(method)
    if reconstruction:
        return tn(
            "{method}, {n} iteration, with reconstruction", "{method}, {n} iterations, with reconstruction", iterations, method=t(method)
        )
    return tn("{method}, {n} iteration, no reconstruction", "{method}, {n} iterations, no reconstruction", iterations, method=t(method))
