"""The tour through Efficient-CapsNet: one image traced through its four convolutions, its primary
capsules and one pass of self-attention routing (`follow`), the steps' titles and the walk that
fills them with the trace's own numbers."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from capsviz.analysis import as_batch, coupling_entropy, rules
from capsviz.analysis import tour_questions as ask
from capsviz.analysis.steps import (
    MAPS,
    MOST,
    SATURATED,
    Step,
    Tour,
    efficient_length,
    gap,
    input_step,
    lab_step,
    lengths_step,
    long_share,
    near_uniform_words,
    reconstruction_step,
    squash_words,
    two,
)
from capsviz.analysis.zoo import parameter_counts
from capsviz.families.efficient_capsnet.model import MSE_WEIGHT
from capsviz.glossary import DIGIT_WORDS, ClassWords, label
from capsviz.i18n import N_, t
from capsviz.routing import efficient_squash
from capsviz.text import plain

# The walk's sentences that depend only on numbers the static site computes too, each once: the walk
# fills them, and capsviz/site/said.py exports this table for web/js/said.js.
MESSAGES = {
    "eff_class_capsule": N_("class capsule"),
    "eff_primary_measured": N_("Measured here: primary capsule lengths {lo} to {hi}; {n} of {I} are longer than {limit}."),
    "eff_predictions": N_(
        "Each primary capsule multiplies its {K} numbers by a learned {K}x{D} matrix {W} once per class capsule: {I} x "
        "{J} in all, each {u_hat} holding {D} numbers for what class j's capsule should be. A long prediction is a loud "
        "one; routing now decides how much of each prediction reaches each class capsule."
    ),
    "eff_predictions_measured": N_(
        "Measured here: the longest prediction for {name} is capsule {top}'s ({top_len}); the predictions for {name} run from {lo} to {hi}."
    ),
    "eff_who": N_("this image's couplings (averaged over the {I} capsules, {name} the predicted class)"),
    "eff_same_rule": N_("By the same rule, {n} of the {I} capsules are near uniform on their own."),
    "eff_decided": N_("More than half of a vote goes to one class from {capsules}."),
    "eff_decided_one": N_("capsule {i} ({share} to {name})"),
    "eff_none_decided": N_("No capsule sends more than half of its vote to one class."),
    "eff_margin": N_(
        "Training used the {margin_loss}, as in Sabour et al.: the right capsule longer than 0.9, every other shorter than 0.1."
    ),
    "eff_decoder": N_(
        "The {reconstruction} decoder of Sabour et al. (three fully connected layers) redraws the {shown} from the {D} "
        "numbers of capsule {name} alone, the others masked to 0. Efficient-CapsNet trains it with {weight} times the "
        "mean squared pixel error beside the margin loss, which keeps the capsule's direction meaningful."
    ),
}


def _say(key: str, /, **values) -> str:
    """MESSAGES[key] in this run's language, filled (a function of its own: the catalog takes its messages from MESSAGES)."""
    return t(MESSAGES[key], **values)


def efficient_steps(words: ClassWords = DIGIT_WORDS) -> list[Step]:
    return [
        Step("input", t("The input")),
        Step("convs", t("Four convolutions: local features")),
        Step("primary", t("Primary capsules: vectors that see the whole image")),
        Step("predictions", t("Predictions u_hat for every class capsule")),
        Step("routing", t("Self-attention routing, in one pass")),
        Step("lengths", t("Class capsules: lengths are the answer")),
        Step("reconstruction", t("The decoder redraws the {shown}", shown=words.shown)),
        Step("lab", t("Does routing matter? This model in the routing lab")),
    ]


@dataclass
class EfficientTour:
    """One image through Efficient-CapsNet; its self-attention routing recorded (one pass).

    sizes: [(channels, side)] after each convolution; maps: (MAPS, S, S) the strongest maps of the
    last one (after its ReLU, before its BatchNorm), map_ids their channels.
    s_primary, u: (I, K) the primary capsules before and after Efficient-CapsNet's squash.
    pred_len: (I, J) |u_hat_j|i|; a: (I, J) the attention logits a_ij; c: (I, J) couplings;
    prior: (I, J) the learned prior b_ij; s, v: (J, D) with s_j = sum_i (c_ij + b_ij) u_hat_j|i;
    lengths: (J,) |v_j|; entropy: (I,) each c_i's entropy over log J (1 = uniform).
    """

    image: np.ndarray
    sizes: list[tuple[int, int]]
    maps: np.ndarray
    map_ids: np.ndarray
    grid: int  # side of the depthwise filter: the whole last map
    s_primary: np.ndarray
    u: np.ndarray
    pred_len: np.ndarray
    a: np.ndarray
    c: np.ndarray
    prior: np.ndarray
    s: np.ndarray
    v: np.ndarray
    lengths: np.ndarray
    entropy: np.ndarray
    winner: int
    runner_up: int
    reconstruction: np.ndarray | None
    parameters: int  # without the decoder

    @property
    def iterations(self) -> int:
        return 1  # one pass

    @property
    def primary_len(self) -> np.ndarray:
        return np.linalg.norm(self.u, axis=-1)

    @property
    def near_uniform(self) -> bool:
        """The couplings are near uniform by the rule the routing lab uses (capsviz.analysis.rules):
        the mean entropy and the mean share given to the predicted class both decide."""
        return rules.near_uniform(float(self.entropy.mean()), float(self.c[:, self.winner].mean()), 1 / self.c.shape[1])

    def decided(self, share: float = 0.5) -> np.ndarray:
        """The primary capsules that send more than `share` of their vote to one class."""
        return np.flatnonzero(self.c.max(-1) > share)


@torch.no_grad()
def efficient_tour(model, image: np.ndarray) -> EfficientTour:
    x = as_batch(image)
    sizes, maps = [], None
    h = x
    for layer in model.convs:
        h = layer(h)
        if isinstance(layer, torch.nn.ReLU):
            maps = h[0]  # (C, S, S): the last one is kept
        if isinstance(layer, torch.nn.BatchNorm2d):
            sizes.append((int(h.shape[1]), int(h.shape[-1])))
    ids = maps.mean((1, 2)).argsort(descending=True)[:MAPS]
    I, K = model.num_primary, model.config.primary_dim
    s_primary = model.primary(h).view(I, K)  # (I, K): the depthwise conv's C numbers as I capsules of K
    u = model.primary_capsules(x)  # (1, I, K)
    u_hat = model.predictions(x)  # (1, J, I, D)
    r = model.route(u_hat, record=True)
    c, a = r.c[0, 0], r.b[0, 0]  # (I, J) each
    prior = r.prior if r.prior is not None else torch.zeros_like(c)  # (I, J)
    s = torch.einsum("ij,jid->jd", c + prior, u_hat[0])  # (J, D): the sum routing squashed, from its own c and b
    v = r.v[0]  # (J, D)
    lengths = v.norm(dim=-1)  # (J,)
    order = lengths.argsort(descending=True)
    winner, runner = int(order[0]), int(order[1])
    J = c.shape[1]
    entropy = coupling_entropy(c) / np.log(J)  # (I,)
    rec = model.decode(v[winner], winner)[0].numpy() if model.decoder is not None else None
    return EfficientTour(
        image=np.asarray(image, np.float32),
        sizes=sizes,
        maps=maps[ids].numpy(),
        map_ids=ids.numpy(),
        grid=int(model.primary.kernel_size[0]),
        s_primary=s_primary.numpy(),
        u=u[0].numpy(),
        pred_len=u_hat[0].norm(dim=-1).T.numpy(),
        a=a.numpy(),
        c=c.numpy(),
        prior=prior.numpy(),
        s=s.numpy(),
        v=v.numpy(),
        lengths=lengths.numpy(),
        entropy=entropy.numpy(),
        winner=winner,
        runner_up=runner,
        reconstruction=rec,
        parameters=parameter_counts(model).without_decoder,
    )


def efficient_squashed(s: np.ndarray) -> np.ndarray:
    return efficient_squash(torch.as_tensor(s)).numpy()


def efficient_walk(
    tour: EfficientTour, names: list[str], words: ClassWords, model_name: str, truth: str, looks: str, lab_rows: list, mse_weight: float
) -> list[Step]:
    """Every step of an Efficient-CapsNet's tour, its figure's data and its sentences."""
    pn = [plain(n) for n in names]
    W, R = tour.winner, tour.runner_up
    I, J = tour.c.shape
    D, K = tour.v.shape[-1], tour.u.shape[-1]
    caps = [t("capsule {i}", i=i + 1) for i in range(I)]
    uniform = 1 / J
    out = []
    for step in efficient_steps(words):
        k = step.key
        if k == "input":
            step = input_step(
                step,
                tour.image,
                truth,
                looks,
                [
                    t(
                        "This is the image the tour follows through **{model}**, an Efficient-CapsNet (Mazzia, Salvetti, Chiaberge 2021). "
                        "It will pass four convolutions, a layer of {I} primary capsules and one class capsule per class, with self-attention "
                        "routing between the two capsule layers: one pass, no iterations. The model has {parameters} parameters without its decoder.",
                        model=plain(model_name),
                        I=I,
                        parameters=f"{tour.parameters:,}",
                    )
                    + gap()
                    + t(
                        "A capsule outputs a vector, not a number: its length is meant to say how likely its thing is present, its direction how it looks."
                    )
                ],
            )
        elif k == "convs":
            last_c, last_side = tour.sizes[-1]
            side = tour.image.shape[-1]
            chain = " -> ".join([f"{side}x{side}"] + [f"{s}x{s}x{ch}" for ch, s in tour.sizes])
            step = replace(
                step,
                figure="maps",
                data={"maps": tour.maps, "names": [t("map {i}", i=i) for i in tour.map_ids], "scale": 8},
                caption=t("bright = the filter responds there (each map scaled to its own maximum)"),
                text=[
                    t(
                        "Four convolutions (5x5, then three of 3x3, the last moving 2 pixels at a time), each followed by ReLU and BatchNorm: "
                        "{chain}. Here the {shown} of the last convolution's {maps} maps ({side}x{side}) that respond most on average, after its "
                        "ReLU and before its BatchNorm (which only rescales and shifts each map as a whole).",
                        chain=chain,
                        shown=len(tour.map_ids),
                        maps=last_c,
                        side=last_side,
                    )
                    + gap()
                    + t("These are still ordinary neurons, one number per place: *whether* a feature is there, not yet *how* it sits.")
                ],
            )
        elif k == "primary":
            side = tour.sizes[-1][1]  # the last convolution's map
            size = np.linalg.norm(tour.s_primary, axis=-1)  # |s| before the squash
            L = tour.primary_len
            hi, lo = int(L.argmax()), int(L.argmin())
            eq1 = size**2 / (1 + size**2)
            step = replace(
                step,
                figure="bars",
                data={
                    "values": L,
                    "names": [str(i + 1) for i in range(I)],
                    "highlight": hi,
                    "title": t("Lengths of the {I} primary capsules (presence)", I=I),
                    "axis": t("length"),
                    "lines": {},
                    "s_len": size,
                    "eq1": eq1,
                    "share_long": long_share(L),  # the share the question's answer quotes
                },
                caption=t("one bar per primary capsule; red: the longest, capsule {i}", i=hi + 1),
                text=[
                    (
                        t(
                            "{primary}: a *depthwise* convolution, one {grid}x{grid} filter per channel, as large as the whole {side}x{side} map: "
                            "each of the {channels} channels becomes one number, a weighted sum of its whole map. Those numbers are grouped into "
                            "{I} capsules of {K}. There is no grid of positions: every capsule sees the whole image.",
                            primary=label("primary"),
                            grid=tour.grid,
                            side=side,
                            channels=tour.s_primary.size,
                            I=I,
                            K=K,
                        )
                        if side == tour.grid
                        else t(
                            "{primary}: a *depthwise* convolution, one {grid}x{grid} filter per channel, over the {side}x{side} map. Its outputs "
                            "are grouped into {I} capsules of {K}.",
                            primary=label("primary"),
                            grid=tour.grid,
                            side=side,
                            I=I,
                            K=K,
                        )
                    ),
                    t(
                        "Efficient-CapsNet's own squash, v = (1 - 1/e^|s|) s / |s|, keeps each vector's direction and sets its length to "
                        "1 - e^-|s|: capsule {hi}: {hi_words}; capsule {lo}: {lo_words}. (Eq. 1 of Sabour et al. would give {hi_eq1} and {lo_eq1}.)",
                        hi=hi + 1,
                        hi_words=squash_words("s", "v", size[hi], L[hi], efficient_length),
                        lo=lo + 1,
                        lo_words=squash_words("s", "v", size[lo], L[lo], efficient_length),
                        hi_eq1=two(eq1[hi]),
                        lo_eq1=two(eq1[lo]),
                    ),
                ],
                measured=_say(
                    "eff_primary_measured",
                    lo=two(L.min()),
                    hi=two(L.max()),
                    n=int((L > SATURATED).sum()),
                    I=I,
                    limit=SATURATED,
                ),
                terms=("efficient_squash", "length", "pose"),
                question=ask.mostly_long(model_name, tour.image, L, SATURATED, MOST),
            )
        elif k == "predictions":
            top = int(tour.pred_len[:, W].argmax())
            step = replace(
                step,
                figure="grid",
                data={
                    "values": tour.pred_len,
                    "rows": caps,
                    "columns": names,
                    "title": t("Length of the predictions u_hat_j|i for each class capsule j (red: {name})", name=names[W]),
                    "highlight": W,
                },
                caption=t("rows: all {I} primary capsules; columns: the class capsules", I=I),
                text=[
                    _say(
                        "eff_predictions",
                        K=K,
                        D=D,
                        W=label("W"),
                        I=I,
                        J=J,
                        u_hat=label("u_hat"),
                    )
                ],
                measured=_say(
                    "eff_predictions_measured",
                    name=pn[W],
                    top=top + 1,
                    top_len=two(tour.pred_len[top, W]),
                    lo=two(tour.pred_len[:, W].min()),
                    hi=two(tour.pred_len[:, W].max()),
                ),
                terms=("u_hat", "W"),
                question=ask.loudest_capsule(model_name, tour.image, tour.pred_len[:, W], names[W]),
            )
        elif k == "routing":
            s_len = np.linalg.norm(tour.s, axis=-1)
            share = float(tour.c[:, W].mean())
            near_each = [rules.near_uniform(float(tour.entropy[i]), float(tour.c[i, W]), uniform) for i in range(I)]
            decided = tour.decided()
            who = _say("eff_who", I=I, name=pn[W])
            said = [
                t("Measured here: {said}", said=near_uniform_words(float(tour.entropy.mean()), share, uniform, who)),
                _say("eff_same_rule", n=sum(near_each), I=I),
            ]
            if len(decided):
                said.append(
                    _say(
                        "eff_decided",
                        capsules=", ".join(
                            _say("eff_decided_one", i=i + 1, share=two(tour.c[i].max()), name=pn[int(tour.c[i].argmax())]) for i in decided
                        ),
                    )
                )
            else:
                said.append(_say("eff_none_decided"))
            said.append(t("The prior b runs from {lo} to {hi}.", lo=f"{tour.prior.min():.3f}", hi=f"{tour.prior.max():.3f}"))
            if tour.prior.max() < 0:
                said.append(
                    t(
                        "All of it is negative (mean {mean}, beside a uniform share of {uniform}): each prediction enters s_j with the weight "
                        "c_ij + b_ji, so a capsule whose coupling to j is below -b_ji pulls s_j the opposite way. For {name}, {n} of the {I} "
                        "weights are negative.",
                        mean=f"{tour.prior.mean():.3f}",
                        uniform=f"{uniform:.3f}",
                        name=pn[W],
                        n=int((tour.c[:, W] + tour.prior[:, W] < 0).sum()),
                        I=I,
                    )
                )
            step = replace(
                step,
                figure="grid",
                data={
                    "values": tour.c,
                    "rows": caps,
                    "columns": names,
                    "title": t(
                        "Couplings c_ij after self-attention (uniform: {uniform}; red: {name})", uniform=two(uniform), name=names[W]
                    ),
                    "highlight": W,
                    "uniform": uniform,
                    "entropy": tour.entropy,
                    "entropy_mean": float(tour.entropy.mean()),
                    "share": share,
                    "prior": tour.prior,
                    "prior_mean": float(tour.prior.mean()),
                    "s_len": s_len,
                    "v_len": tour.lengths,
                },
                caption=t("each row: one primary capsule's couplings, adding up to 1 over the class capsules"),
                text=[
                    t(
                        "Self-attention routing, in one pass. For each class j, each prediction's {self_attention} with all the predictions "
                        "for j: a_ji = u_hat_j|i . (sum over k of u_hat_j|k) / sqrt({D}). Capsule i's couplings, {c}, are a softmax of its a_ji "
                        "over the {J} classes j, so they add up to 1. Then s_j = sum_i (c_ij + b_ji) u_hat_j|i, where {prior} is the same for "
                        "every image, and v_j = (1 - 1/e^|s_j|) s_j / |s_j|: {squash}.",
                        self_attention=label("self_attention"),
                        D=D,
                        c=label("c"),
                        J=J,
                        prior=label("prior"),
                        squash=squash_words(f"s_{pn[W]}", f"v_{pn[W]}", s_len[W], tour.lengths[W], efficient_length),
                    )
                ],
                measured=gap().join(said),
                table={
                    t("primary capsule"): caps,
                    t("a to {name}", name=pn[W]): tour.a[:, W],
                    t("c to {name}", name=pn[W]): tour.c[:, W],
                    t("b to {name}", name=pn[W]): tour.prior[:, W],
                    t("c + b to {name}", name=pn[W]): tour.c[:, W] + tour.prior[:, W],
                    t("c to {name}", name=pn[R]): tour.c[:, R],
                },
                terms=("self_attention", "c", "prior", "u_hat"),
                question=ask.still_near_uniform(model_name, tour.image, tour.c, float(tour.entropy.mean()), share, uniform, None),
            )
        elif k == "lengths":
            step = lengths_step(
                step,
                tour.lengths,
                names,
                W,
                R,
                truth,
                _say("eff_class_capsule"),
                t("Class capsule lengths |v_j| after routing"),
                [
                    _say(
                        "eff_margin",
                        margin_loss=label("margin_loss"),
                    )
                ],
            )
            step.question = ask.longest_class(model_name, tour.image, tour.lengths, names, truth)
        elif k == "reconstruction":
            step = reconstruction_step(
                step,
                tour.image,
                tour.reconstruction,
                names[W],
                D,
                "Efficient-CapsNet",
                [
                    _say(
                        "eff_decoder",
                        reconstruction=label("reconstruction"),
                        shown=words.shown,
                        D=D,
                        name=pn[W],
                        weight=mse_weight,
                    )
                    + gap()
                    + t("The **DigitCaps explorer** lets you nudge each of the {D} numbers and watch the drawing change.", D=D)
                ],
            )
        elif k == "lab":
            step = lab_step(step, lab_rows, "self-attention", model_name, stated_at=t("the routing step"))
        out.append(step)
    return out


def walk(tour: EfficientTour, names, words, model_name, truth, looks, lab_rows, config=None) -> list[Step]:
    """Every step as the page shows it, its decoder's loss weighted as the model was trained."""
    return efficient_walk(tour, names, words, model_name, truth, looks, lab_rows, MSE_WEIGHT)


TOUR = Tour(EfficientTour, efficient_tour, lambda _, words, grid=None: efficient_steps(words), walk)  # one pass: no iterations to count
