"""The tour through matrix capsules with EM routing: one image traced through its primary capsules,
the votes and every EM iteration (`follow`), the steps' titles and the walk that fills them with
the trace's own numbers."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from capsviz.analysis import as_batch
from capsviz.analysis import tour_questions as ask
from capsviz.analysis.steps import SHOWN, Step, Tour, gap, input_step, plane, pose_words, share_words, two
from capsviz.glossary import label
from capsviz.i18n import N_, t
from capsviz.text import plain

# The walk's sentences that depend only on numbers the static site computes too, each once: the walk
# fills them, and capsviz/site/said.py exports this table for web/js/said.js.
MESSAGES = {
    "em_input": N_(
        "This is the image the tour follows through **{model}**, matrix capsules with EM routing (Hinton et al. 2018, "
        "Fig. 1). Each capsule here holds a learned 4x4 matrix, which the paper intends to hold the thing's pose, and a"
        " separate activation between 0 and 1, meant to say how present it is. Nothing in training makes the matrix a "
        "rotation or a scale, so its 16 numbers are a learned code: which entry means what is not given."
    ),
    "em_measured": N_(
        "Measured here: activation of {w} {a_w}, of {r} {a_r}; the six most active {layer} capsules send {share} of their vote to {w}."
    ),
    "em_answer": N_(
        "The answer is the most active class capsule: **{w}** with activation {a_w} (label: {truth}); runner-up {r} with {a_r}."
    ),
    # the answer of an image without a label (a drawing on the static site, web/js/said.js): the walk's own has one
    "em_answer_unlabelled": N_("The answer is the most active class capsule: **{w}** with activation {a_w}; runner-up {r} with {a_r}."),
    "em_place": N_("{layer} type {type} at row {row}, col {col}"),
}


def _say(key: str, /, **values) -> str:
    """MESSAGES[key] in this run's language, filled (a function of its own: the catalog takes its messages from MESSAGES)."""
    return t(MESSAGES[key], **values)


def matrix_steps(iterations: int) -> list[Step]:
    return [
        Step("input", t("The input")),
        Step("primary", t("Primary capsules: a pose matrix and an activation")),
        Step("votes", t("Votes for every class capsule")),
        *[Step(f"iteration{it + 1}", t("EM routing, iteration {k} of {n}", k=it + 1, n=iterations)) for it in range(iterations)],
        Step("activations", t("Class capsules: activations are the answer")),
    ]


CLASS_LAYER_IN = "ConvCaps2"  # the layer whose capsules the class capsules route (capsviz.families.matrix_capsnet.model)


@dataclass
class MatrixTour:
    """One image through a matrix-capsule model; the class layer's EM recorded.

    primary_a: (H, W, types) primary activations; pose: (4, 4) the most active primary capsule's
    pose matrix, pose_where its place. R: (T, I, J); a: (T, J); mu, sigma: (T, J, 16);
    lambdas: (T,); votes2d: (J, SHOWN, 2) the most active lower capsules' votes for each class in
    that class's plane; mu2d, sigma2d: (T, J, 2) each Gaussian in the same planes.
    """

    image: np.ndarray
    primary_a: np.ndarray
    pose: np.ndarray
    pose_where: str
    shown: np.ndarray
    shown_names: list[str]
    R: np.ndarray
    a: np.ndarray
    mu: np.ndarray
    sigma: np.ndarray
    lambdas: np.ndarray
    votes2d: np.ndarray
    mu2d: np.ndarray
    sigma2d: np.ndarray
    a_in: np.ndarray
    winner: int
    runner_up: int
    class_layer_in: tuple[int, int, int]  # (H, W, types) of the capsules the class layer routes

    @property
    def iterations(self) -> int:
        return len(self.R)


@torch.no_grad()
def matrix_tour(model, image: np.ndarray, iterations: int | None = None) -> MatrixTour:
    x = as_batch(image)
    out = model.trace(x, iterations)
    tr = out.trace
    h = torch.relu(model.conv1(x))
    pose, a = model.primary(h)  # (1, H, W, types, 16), (1, H, W, types)
    H, W, K = a.shape[1:]
    top = int(a[0].flatten().argmax())
    r_, c_, k_ = top // (W * K), top // K % W, top % K
    a_fin = tr.a_trace[-1, 0]  # (J,)
    order = a_fin.argsort(descending=True)
    winner, runner = int(order[0]), int(order[1])
    votes = tr.votes[0].float()  # (I, J, 16)
    I, J, _ = votes.shape
    # the class layer's lower capsules are ConvCaps2's outputs, (H2, W2, types) flattened as ClassCaps does
    a_in = out.layer_traces["convcaps2"].a[0].reshape(-1).float()  # (I,)
    H2 = W2 = model.final_grid
    K2 = I // (H2 * W2)
    shown = a_in.argsort(descending=True)[:SHOWN]
    names = [
        _say(
            "em_place",
            layer=CLASS_LAYER_IN,
            type=int(i) % K2 + 1,
            row=int(i) // K2 // W2 + 1,
            col=int(i) // K2 % W2 + 1,
        )
        for i in shown
    ]
    T = tr.R.shape[0]
    votes2d = torch.zeros(J, SHOWN, 2)
    mu2d, sigma2d = torch.zeros(T, J, 2), torch.zeros(T, J, 2)
    mu, sigma = tr.mu_trace[:, 0].float(), tr.sigma[:, 0].float()  # (T, J, 16)
    for j in range(J):
        centre = mu[-1, j]
        P = plane(votes[:, j] - centre, votes[shown, j].mean(0) - centre + 1e-6)  # (2, 16)
        votes2d[j] = (votes[shown, j] - centre) @ P.T
        mu2d[:, j] = (mu[:, j] - centre) @ P.T
        sigma2d[:, j] = ((P**2) @ (sigma[:, j] ** 2).T).T.sqrt()  # the spread along each drawn axis
    return MatrixTour(
        image=np.asarray(image, np.float32),
        primary_a=a[0].numpy(),
        pose=pose[0, r_, c_, k_].view(4, 4).numpy(),
        pose_where=_say("em_place", layer="PrimaryCaps", type=k_ + 1, row=r_ + 1, col=c_ + 1),
        shown=shown.numpy(),
        shown_names=names,
        R=tr.R[:, 0].numpy(),
        a=tr.a_trace[:, 0].numpy(),
        mu=mu.numpy(),
        sigma=sigma.numpy(),
        lambdas=tr.lambdas.numpy(),
        votes2d=votes2d.numpy(),
        mu2d=mu2d.numpy(),
        sigma2d=sigma2d.numpy(),
        a_in=a_in.numpy(),
        winner=winner,
        runner_up=runner,
        class_layer_in=(H2, W2, K2),
    )


def matrix_walk(tour: MatrixTour, names: list[str], model_name: str, truth: str, looks: str) -> list[Step]:
    """Every step of a matrix-capsule model's tour, its figure's data and its sentences."""
    pn = [plain(n) for n in names]
    W, R = tour.winner, tour.runner_up
    out = []
    for step in matrix_steps(tour.iterations):
        k = step.key
        if k == "input":
            step = input_step(
                step,
                tour.image,
                truth,
                looks,
                [
                    _say(
                        "em_input",
                        model=plain(model_name),
                    )
                ],
            )
        elif k == "primary":
            H, Wd, types = tour.primary_a.shape
            H2, W2, K2 = tour.class_layer_in
            step = replace(
                step,
                figure="em_primary",
                data={"maps": tour.primary_a.transpose(2, 0, 1), "pose": tour.pose, "top": tour.primary_a.max()},
                caption=t(
                    "The pose matrix of the most active primary capsule ({where}, activation {a})",
                    where=tour.pose_where,
                    a=two(tour.primary_a.max()),
                ),
                text=[
                    t(
                        "A convolution, then the PrimaryCaps layer: {types} capsule types at each of {h}x{w} positions; each has a 4x4 pose "
                        "matrix and a logistic activation (Sec. 3). Two convolutional capsule layers, ConvCaps1 and {layer}, route by EM in "
                        "small windows; the tour follows the last routing, from {layer}'s {n} capsules ({k} types at each of {h2}x{w2} "
                        "positions) into the class capsules.",
                        types=types,
                        h=H,
                        w=Wd,
                        layer=CLASS_LAYER_IN,
                        n=H2 * W2 * K2,
                        k=K2,
                        h2=H2,
                        w2=W2,
                    )
                ],
                measured=pose_words(tour.pose),
                terms=("pose", "a_in"),
                question=ask.rotation_range(model_name, tour.image, tour.pose),
            )
        elif k == "votes":
            step = replace(
                step,
                figure="votes",
                caption=t("before any routing: every vote is assigned equally to every class capsule"),
                text=[
                    t(
                        "Each {layer} capsule (the lower capsules of this last routing) multiplies its pose by a learned 4x4 transform per "
                        "class: a {vote} for that class's pose (16 numbers, drawn here in a plane through the class capsule's final mean pose, "
                        "the same plane in every EM step). Votes that land close together agree on one pose for the whole: that is what EM looks for.",
                        layer=CLASS_LAYER_IN,
                        vote=label("vote"),
                    )
                ],
                terms=("vote",),
            )
        elif k.startswith("iteration"):
            it = int(k.removeprefix("iteration")) - 1
            rows = {t("lower capsule ({layer})", layer=CLASS_LAYER_IN): tour.shown_names, t("activation a"): tour.a_in[tour.shown]}
            for j in (W, R):
                rows[t("R to {name}", name=pn[j])] = tour.R[it][tour.shown, j]
            step = replace(
                step,
                figure="em",
                data={"t": it, "a": tour.a[it], "R": tour.R[it][tour.shown], "lambda": tour.lambdas[it]},
                caption=t("each class capsule's Gaussian: mean pose (cross), spread (ellipses); a vote's opacity is its assignment R"),
                text=[
                    t(
                        "**{M_step}**: each class capsule refits its {mu} and {sigma} to the votes weighted by {R} and by the lower "
                        "activations, and sets its {a_j} (tighter = more active; {lambda_} = {value} here). **{E_step}**: each vote is then "
                        "reassigned by how well it fits each Gaussian.",
                        M_step=label("M_step"),
                        mu=label("mu"),
                        sigma=label("sigma"),
                        R=label("R"),
                        a_j=label("a_j"),
                        lambda_=label("lambda"),
                        value=two(tour.lambdas[it]),
                        E_step=label("E_step"),
                    )
                    + (gap() + t("This first M-step used equal assignments.") if it == 0 else "")
                ],
                measured=_say(
                    "em_measured",
                    w=pn[W],
                    a_w=two(tour.a[it, W]),
                    r=pn[R],
                    a_r=two(tour.a[it, R]),
                    layer=CLASS_LAYER_IN,
                    share=share_words(tour.R[it][tour.shown, W]),
                ),
                table=rows,
                terms=("a_in", "R"),
                question=ask.em_vote(model_name, tour.image, it + 1, tour.R[it][tour.shown[0]], names, W, R, CLASS_LAYER_IN),
            )
        elif k == "activations":
            a = tour.a[-1]
            step = replace(
                step,
                figure="bars",
                data={
                    "values": a,
                    "names": names,
                    "highlight": W,
                    "title": t("Class capsule activations after EM routing"),
                    "axis": t("activation"),
                    "lines": {},
                    "lambda": tour.lambdas[-1],  # quoted in the text
                },
                caption=t("the prediction is the most active class capsule"),
                text=[
                    _say(
                        "em_answer",
                        w=pn[W],
                        a_w=two(a[W]),
                        truth=plain(truth),
                        r=pn[R],
                        a_r=two(a[R]),
                    )
                    + gap()
                    + t(
                        "Training used the {spread_loss}: the right class more active than every other by a margin. capsviz ramps {lambda_} "
                        "only up to {value} here, which keeps the activations in a middle range, so the winner is clear by rank, not by a value "
                        "near 1: the **EM routing** page follows them iteration by iteration.",
                        spread_loss=label("spread_loss"),
                        lambda_=label("lambda"),
                        value=two(tour.lambdas[-1]),
                    )
                ],
                terms=("spread_loss", "a_j", "lambda"),
                link=("pages/em.py", t("EM routing, iteration by iteration")),
                question=ask.most_active_class(model_name, tour.image, a, names, truth),
            )
        out.append(step)
    return out


def walk(tour: MatrixTour, names, words, model_name, truth, looks, lab_rows, config=None) -> list[Step]:
    """Every step as the page shows it (class capsules for every dataset: `words` are not needed)."""
    return matrix_walk(tour, names, model_name, truth, looks)


TOUR = Tour(MatrixTour, matrix_tour, lambda iterations, _words, grid=None: matrix_steps(iterations), walk)
