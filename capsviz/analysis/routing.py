"""What the routing inspector pages draw, computed from the core's recorded traces (numpy out)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch

from capsviz.analysis import as_batch, coupling_entropy, rules
from capsviz.analysis.rule_words import long_votes_words, trend_outcome, trend_words, uniform_words
from capsviz.i18n import t, tn
from capsviz.registry import routing_words


@dataclass
class DynamicTrace:
    """One image through a dynamic-routing CapsNet with every iteration recorded.

    c: (T, I, J) coupling coefficients; grid, types: I = grid * grid * types primary capsules.
    lengths: (T, J) |v_j| after each iteration; b_change: (T,) mean |delta b| (Appendix A);
    c_change: (T - 1,) mean |c_{t+1} - c_t|, how much the couplings still move.
    agreement: (I, J) u_hat_j|i . v_j after the last iteration.
    softmax: what each set of couplings sums to 1 over, the model's own (capsviz.config.ROUTING_SOFTMAX):
        "classes", each input capsule splits its vote over the J classes (the paper); "inputs", each
        class capsule's couplings sum to 1 over the I input capsules.
    entropy: (T, I) of each input capsule's couplings over the classes, or with softmax "inputs"
        (T, J) of each class capsule's couplings over the inputs.
    place: (grid * grid, I) how much of primary capsule i lies at each position of the grid (its
        share of the values of that position, from the model's grouping index map); grouping: the
        model's primary grouping (capsviz.families.capsnet.config.PRIMARY_GROUPINGS); dim: the values in one primary capsule.
    agreements: (T, I, J) the agreement after each iteration (`agreement` is the last), from which
        `first` gives the trace of fewer iterations; v: (T, J, D) the class capsules after each.
    """

    c: np.ndarray
    lengths: np.ndarray
    b_change: np.ndarray
    c_change: np.ndarray
    agreement: np.ndarray
    entropy: np.ndarray
    grid: int
    types: int
    softmax: str
    place: np.ndarray
    grouping: str
    dim: int
    agreements: np.ndarray | None = None
    v: np.ndarray | None = None

    def first(self, iterations: int) -> DynamicTrace:
        """The trace of the first `iterations` iterations alone: Procedure 1 run t times is the first
        t iterations of a longer run (capsviz.routing.procedure_1), so one recorded run of the most
        iterations a page offers gives every shorter one without routing again."""
        T = len(self.c)
        if not 1 <= iterations <= T or self.agreements is None:
            raise ValueError(f"a trace of {T} recorded iterations has no first {iterations}")
        if iterations == T:
            return self
        return replace(
            self,
            c=self.c[:iterations],
            lengths=self.lengths[:iterations],
            b_change=self.b_change[:iterations],
            c_change=self.c_change[: iterations - 1],
            agreement=self.agreements[iterations - 1],
            entropy=self.entropy[:iterations],
            agreements=self.agreements[:iterations],
            v=None if self.v is None else self.v[:iterations],
        )

    @property
    def uniform(self) -> float:
        """The coupling every pair gets before routing: 1/J, or 1/I with a softmax over the inputs."""
        T, I, J = self.c.shape
        return 1.0 / (I if self.softmax == "inputs" else J)

    @property
    def uniform_entropy(self) -> float:
        """The entropy of a uniform split (nats): log J, or log I with a softmax over the inputs."""
        return float(np.log(1.0 / self.uniform))

    def coupling_maps(self, t: int) -> np.ndarray:
        """(J, grid, grid): iteration t's coupling to each class at each position, averaged over the
        primary capsules built from the values there (over the capsule types, for the paper's grouping)."""
        return (self.place @ self.c[t]).T.reshape(-1, self.grid, self.grid)

    def by_capsule(self, values: np.ndarray) -> np.ndarray:
        """(rows, grid * grid) one number per primary capsule (I,) laid out for a heatmap: for the
        paper's grouping a row per capsule type and a column per position; for another grouping the
        capsules in the model's own order, grid * grid to a row (they have no one position)."""
        G2 = self.grid * self.grid
        if self.grouping == "paper":
            return values.reshape(G2, self.types).T
        return values.reshape(-1, G2)

    def agreement_map(self, j: int) -> np.ndarray:
        """(grid, grid): the agreement with class j summed over the primary capsules at each position
        (over the capsule types, for the paper's grouping; each capsule counted by the share of its
        values there, for another)."""
        return (self.types * self.place @ self.agreement[:, j]).reshape(self.grid, self.grid)


def primary_places(grouping: str, types: int, dim: int, grid: int) -> np.ndarray:
    """(grid * grid, I): the share of each position's primary-capsule values that capsule i holds,
    from the model's grouping index map (capsviz.families.capsnet.model.primary_index): a row sums to 1.
    For the paper's grouping each position holds `types` whole capsules (1/types each); for a
    view grouping a capsule is spread over the positions of the values it is built from."""
    from capsviz.families.capsnet.model import primary_index

    index = primary_index(grouping, types, dim, grid).numpy()  # (I, K) into (T*K, G, G) flattened
    G2, I = grid * grid, index.shape[0]
    counts = np.zeros((G2, I))
    np.add.at(counts, (index % G2, np.repeat(np.arange(I)[:, None], index.shape[1], 1)), 1.0)
    return counts / counts.sum(1, keepdims=True)


def entropy_of(c: np.ndarray, softmax: str) -> np.ndarray:
    """The couplings' entropy along the axis they sum to 1 over: c (..., I, J) -> (..., I) over the
    classes, or (..., J) over the inputs with softmax "inputs"."""
    return coupling_entropy(np.swapaxes(c, -1, -2) if softmax == "inputs" else c)


@torch.no_grad()
def dynamic_trace(model, image: np.ndarray, iterations: int) -> DynamicTrace:
    u_hat = model.predictions(as_batch(image))  # (1, J, I, D)
    r = model.route(u_hat, routing="dynamic", iterations=iterations, record=True)  # with the model's own routing options
    c = r.c[:, 0].numpy()  # (T, I, J)
    agreements = torch.einsum("jid,tjd->tij", u_hat[0], r.v_trace[:, 0]).numpy()  # (T, I, J): u_hat_j|i . v_j after each iteration
    cfg = model.config
    softmax = getattr(cfg, "routing_softmax", "classes")
    grouping = getattr(cfg, "primary_grouping", "paper")
    place = primary_places(grouping, cfg.primary_types, cfg.primary_dim, cfg.primary_grid)
    c_change = np.abs(np.diff(c, axis=0)).mean((1, 2))  # (T-1,)
    lengths = r.v_trace[:, 0].norm(dim=-1).numpy()
    return DynamicTrace(
        c,
        lengths,
        r.b_change[:, 0].numpy(),
        c_change,
        agreements[-1],
        entropy_of(c, softmax),
        cfg.primary_grid,
        cfg.primary_types,
        softmax,
        place,
        grouping,
        cfg.primary_dim,
        agreements,
        r.v_trace[:, 0].numpy(),
    )


@dataclass
class AttentionTrace:
    """One image through self-attention routing (Efficient-CapsNet), one pass.

    c: (I, J) couplings, softmax over the classes of the attention logits a: (I, J);
    prior: (I, J) the learned log prior b, added to c in s_j = sum_i (c_ij + b_ij) u_hat_j|i;
    lengths: (J,) |v_j|; entropy: (I,) of each c_i; vote: (I, J) |u_hat_j|i|, each prediction's length.
    """

    c: np.ndarray
    a: np.ndarray
    prior: np.ndarray
    lengths: np.ndarray
    entropy: np.ndarray
    vote: np.ndarray


@torch.no_grad()
def attention_trace(model, image: np.ndarray) -> AttentionTrace:
    u_hat = model.predictions(as_batch(image))  # (1, J, I, D)
    r = model.route(u_hat, routing="self-attention", record=True)
    c = r.c[0, 0].numpy()  # (I, J)
    prior = r.prior.numpy() if r.prior is not None else np.zeros_like(c)
    entropy = coupling_entropy(c)  # (I,)
    return AttentionTrace(c, r.b[0, 0].numpy(), prior, r.v[0].norm(dim=-1).numpy(), entropy, u_hat[0].norm(dim=-1).T.numpy())


@torch.no_grad()
def _channels(images: torch.Tensor) -> torch.Tensor:
    return images.unsqueeze(1) if images.dim() == 3 else images  # (B, C, H, W)


def mean_b_change(model, images: torch.Tensor, iterations: int) -> np.ndarray:
    """(T,) Appendix A averaged over a batch of images (B, H, W) or (B, C, H, W) float."""
    return (
        model.trace(_channels(images), iterations, routing="dynamic").trace.b_change.mean(1).numpy()
    )  # whatever couplings it was trained with


@torch.no_grad()
def coupling_summary(model, images: torch.Tensor, iterations: int | None = None, routing: str = "dynamic") -> dict:
    """How far routing moves the couplings away from uniform, over a batch of images (B, H, W) in
    [0, 1]. Per iteration: the mean coupling of a primary capsule to the predicted class, plainly
    and weighted by the length of its vote for that class (long votes are the ones that count in
    s_j), and the mean coupling entropy along the axis the couplings sum to 1 over (`softmax`:
    "classes", uniform 1/J and entropy log J, the paper's; "inputs", the model's own dynamic
    routing sums each class's couplings over the I inputs: uniform 1/I, entropy log I, and the mean
    coupling to a class is 1/I whatever the routing). `routing` (one of capsviz.routing.ROUTINGS)
    is the routing the model is run with; the one-pass routings give one entry per list."""
    u_hat = model.predictions(_channels(images))  # (B, J, I, D)
    r = model.route(u_hat, routing=routing, iterations=iterations, record=True)
    T, B, I, J = r.c.shape
    softmax = getattr(getattr(model, "config", None), "routing_softmax", "classes") if routing == "dynamic" else "classes"
    pred = r.v.norm(dim=-1).argmax(1)  # (B,)
    to_pred = r.c.gather(3, pred.view(1, B, 1, 1).expand(T, B, I, 1)).squeeze(3)  # (T, B, I)
    vote = u_hat.norm(dim=-1).gather(1, pred.view(B, 1, 1).expand(B, 1, I)).squeeze(1)  # (B, I): |u_hat_pred|i|
    entropy = entropy_of(r.c.numpy(), softmax)  # (T, B, I) or (T, B, J)
    n = I if softmax == "inputs" else J
    return {
        "n_images": B,
        "softmax": softmax,
        "uniform": 1.0 / n,
        "coupling_to_prediction": to_pred.mean((1, 2)).tolist(),
        "vote_weighted_coupling_to_prediction": ((to_pred * vote).sum((1, 2)) / vote.sum().clamp_min(1e-12)).tolist(),
        "entropy": entropy.mean((1, 2)).tolist(),
        "uniform_entropy": float(np.log(n)),
    }


@torch.no_grad()
def iteration_sweep(model, image: np.ndarray, max_iterations: int = 10) -> dict:
    """The same weights routed with 1..max_iterations: lengths (T, J), predictions, reconstructions.

    Procedure 1 with t iterations is the first t iterations of a longer run, so one recorded run
    of max_iterations gives every v, and the decoder redraws all T winners in one batch."""
    r = model.trace(as_batch(image), max_iterations, routing="dynamic").trace  # whatever couplings it was trained with
    return _sweep(model, r.v_trace[:, 0])  # (T, J, D): v after each iteration


def sweep_of_trace(model, tr: DynamicTrace) -> dict:
    """`iteration_sweep`'s answer from a recorded trace (its v after each iteration) without routing
    again: lengths (T, J), predictions and reconstructions for 1..T iterations."""
    return _sweep(model, torch.from_numpy(tr.v))


@torch.no_grad()
def _sweep(model, v: torch.Tensor) -> dict:
    """v (T, J, D), the class capsules after each iteration, as the sweep shows them: lengths
    (T, J), each count's prediction, and the decoder's drawing of each winner, in one batch."""
    T = len(v)
    lengths = v.norm(dim=-1)  # (T, J)
    preds = lengths.argmax(1)  # (T,)
    recs = [None] * T
    if model.decoder is not None:
        recs = list(model.decode(v[torch.arange(T), preds], preds).numpy())  # T x (H, W)
    return {"lengths": lengths.numpy(), "predictions": preds.tolist(), "reconstructions": recs}


# MultiMNIST models on the pages that follow one image: a test digit alone, centred on their canvas


def on_canvas(dataset: str, size: int) -> int:
    """How far (pixels each side) a 28x28 test digit is padded to be centred on the size x size
    canvas a model of `dataset` reads: MultiMNIST's 36x36 (capsviz.data.multimnist), where the digit
    sits with no shift, as the routing lab reads it for the digit error; 0 for any other model."""
    from capsviz.data import multimnist

    return multimnist.OFFSET if dataset == "multimnist" and size == multimnist.SIZE else 0


def centred(image: np.ndarray, pad: int) -> np.ndarray:
    """A picked image (H, W) padded by `pad` blank pixels on each side (on_canvas)."""
    return np.pad(image, pad) if pad else image


def centred_batch(images: torch.Tensor, pad: int) -> torch.Tensor:
    """A batch of test images (N, H, W) or (N, C, H, W) padded by `pad` blank pixels on each side."""
    return torch.nn.functional.pad(images, (pad,) * 4) if pad else images


def canvas_words(size: int, pad: int) -> str:
    """What a MultiMNIST model is shown on a page that follows one image (pad from on_canvas)."""
    return t(
        "This model was trained on MultiMNIST: two training digits overlapping on a {size}x{size} canvas. Here it reads one digit "
        "alone, centred on that canvas ({pad} blank pixels on each side of the 28x28 digit), as the routing lab reads it for its "
        "digit error. The **MultiMNIST** page follows pairs of digits.",
        size=size,
        pad=pad,
    )


# The sentences the dynamic routing page writes, each from the numbers its figure draws


def flat(maps: np.ndarray) -> bool:
    """Whether every coupling drawn is equal (iteration 1, or agreements too small to move them)."""
    return bool(np.ptp(maps) < 1e-6)


def trained_with_words(config) -> str:
    """What the model was trained with, from its config: the couplings it was trained with and, for
    dynamic routing, how many iterations (one iteration never moves the couplings from uniform)."""
    n = config.routing_iterations
    if config.couplings == "dynamic":
        if n == 1:
            return t("dynamic routing, 1 iteration (one pass: its couplings stayed uniform, so routing never moved them)")
        return tn("dynamic routing, {n} iteration", "dynamic routing, {n} iterations", n)
    return routing_words(config.couplings)


def once_words(tr: DynamicTrace) -> str:
    """What the page says when routing runs once (T = 1): only the coupling maps are flat."""
    return t(
        "Routing runs once here, so there is nothing to step through: before the first agreement is added, every "
        "set of couplings is even (c = {c} each), so the coupling maps below are flat. The agreement map "
        "further down is not: it is what this one pass measured, what a second iteration would add to b. "
        "Raise **Routing iterations at inference** to watch the couplings move.",
        c=f"{tr.uniform:.3g}",
    )


def _digits(tr: DynamicTrace) -> int:
    return 2 + max(1, -math.floor(math.log10(tr.uniform)))  # 3 decimals for 1/10, 5 for 1/144: the digits that move


def times(ratio: float) -> str:
    """A ratio with one decimal, or as many as it takes to show a non-zero ratio as non-zero
    (0.04, not 0.0)."""
    if ratio == 0 or abs(ratio) >= 0.1:
        return f"{ratio:.1f}"
    return f"{ratio:.{-math.floor(math.log10(abs(ratio)))}f}"


def span_words(lo: float, hi: float, uniform: float, d: int) -> str:
    """The span of couplings drawn, by the small-span rule (rules.small_span): a clause that follows
    "At iteration k"."""
    v = dict(lo=f"{lo:.{d}f}", hi=f"{hi:.{d}f}", uniform=f"{uniform:.{d}f}")
    if rules.small_span(lo, hi, uniform):
        return t(
            "the squares span only {lo} to {hi} (uniform: {uniform}), all within {factor} times uniform either way, so the "
            "colours exaggerate small differences",
            factor=rules.NEAR_UNIFORM_SHARE,
            **v,
        )
    return t(
        "the squares span {lo} to {hi} (uniform: {uniform}), from {low_times} to {high_times} times uniform",
        low_times=times(lo / uniform),
        high_times=times(hi / uniform),
        **v,
    )


def map_words(tr: DynamicTrace, t_: int, capsule: str, thing: str, digits: bool, j: int, name: str) -> tuple[str, str]:
    """The coupling maps' title and caption at iteration t_ (0-based): where each square's number
    comes from (the model's grouping), the span of the couplings the maps draw, and beside class j's
    map (`name`, the one the detailed map shows) the span of its single primary capsules, the
    detailed map's own range."""
    maps = tr.coupling_maps(t_)
    G = tr.grid
    title = t("Iteration {k}: couplings c", k=t_ + 1)
    if tr.grouping == "paper":
        where = t(
            "each square is one of the {G}x{G} positions of the primary capsules (rows and columns counted from 1 at the "
            "top left), averaged over their {types} types",
            G=G,
            types=tr.types,
        )
    else:
        where = t(
            "a primary capsule of this model is {dim} neighbouring values of one conv map (some straddle two maps), not one "
            "position's channels, so it has no one position: each square averages the couplings of the capsules built from "
            "the values at that position, each counted by its share of them",
            dim=tr.dim,
        )
    d = _digits(tr)
    if flat(maps):
        spread = (
            t("At iteration 1 every coupling is {c}: nothing has been routed yet.", c=f"{maps.max():.{d}f}")
            if t_ == 0
            else t(
                "At iteration {k} every coupling is still {c}: the agreements added to b are too small to move them.",
                k=t_ + 1,
                c=f"{maps.max():.{d}f}",
            )
        )
    else:
        c = tr.c[t_, :, j]
        v = dict(
            k=t_ + 1,
            span=span_words(float(maps.min()), float(maps.max()), tr.uniform, d),
            name=name,
            lo=f"{maps[j].min():.{d}f}",
            hi=f"{maps[j].max():.{d}f}",
            c_lo=f"{c.min():.{d}f}",
            c_hi=f"{c.max():.{d}f}",
            thing=thing,
        )
        if digits:
            spread = t(
                "At iteration {k} {span}. These are averages: the {name} map spans {lo} to {hi}, while its single primary "
                "capsules span {c_lo} to {c_hi} at this iteration (the detailed map below shows them). Positions over blank "
                "background vote too: a bright square there means those primary capsules' predictions happen to agree with "
                "that {thing}, not that ink is there.",
                **v,
            )
        else:
            spread = t(
                "At iteration {k} {span}. These are averages: the {name} map spans {lo} to {hi}, while its single primary "
                "capsules span {c_lo} to {c_hi} at this iteration (the detailed map below shows them). Positions over blank "
                "background vote too: a bright square there means those primary capsules' predictions happen to agree with "
                "that {thing}, not that the object is there.",
                **v,
            )
    if tr.softmax == "inputs":
        caption = t(
            "Each small map is one {capsule}; {where}. Brighter means that {capsule} draws a larger share of its input from "
            "that position (this model's couplings sum to 1 over the input capsules for each class). {spread}",
            capsule=capsule,
            where=where,
            spread=spread,
        )
    else:
        caption = t(
            "Each small map is one {capsule}; {where}. Brighter means that position sends a larger share of its vote to that "
            "{thing}. {spread}",
            capsule=capsule,
            where=where,
            thing=thing,
            spread=spread,
        )
    return title, caption


def detail_words(tr: DynamicTrace, t_: int, j: int, name: str) -> tuple[str, str]:
    """The detailed map's title and caption: every primary capsule's coupling to class j at iteration t_."""
    values = tr.c[t_, :, j]
    d = _digits(tr)
    title = t("Coupling to {name}, iteration {k}", name=name, k=t_ + 1)
    if tr.grouping == "paper":
        what = t(
            "One square per primary capsule, not averaged: a column per position on the {G}x{G} grid, row by row (1 = row 1, "
            "col 1 at the top left; {G2} = row {G}, col {G}), a row per capsule type; hover for its type, row and column.",
            G=tr.grid,
            G2=tr.grid * tr.grid,
        )
    else:
        what = t("One square per primary capsule, not averaged, in the model's own order, {G2} to a row.", G2=tr.grid * tr.grid)
    if np.ptp(values) < 1e-6:
        return title, t("{what} At iteration {k} every one is {c}.", what=what, k=t_ + 1, c=f"{values.max():.{d}f}")
    span = span_words(float(values.min()), float(values.max()), tr.uniform, d)
    return title, t("{what} At iteration {k} {span}.", what=what, k=t_ + 1, span=span)


def capsule_axes(tr: DynamicTrace) -> tuple[str, str]:
    """The detailed maps' x and y axis titles (`DynamicTrace.by_capsule`), counted from 1."""
    G2 = tr.grid * tr.grid
    if tr.grouping == "paper":
        return t("position 1-{G2}, row by row", G2=G2), t("capsule type")
    return t("capsule, {G2} to a row", G2=G2), t("row")


def capsule_name(kind: int, row: int, col: int) -> str:
    """A primary capsule by type, row and column (0-based in), counted from 1 as the guided tour names it."""
    return t("type {kind} at row {row}, col {col}", kind=kind + 1, row=row + 1, col=col + 1)


def capsule_labels(tr: DynamicTrace) -> dict:
    """The detailed maps' axis values (from 1) and each square's name for the hover, laid out as
    `DynamicTrace.by_capsule` lays out the values."""
    G, G2 = tr.grid, tr.grid * tr.grid
    if tr.grouping == "paper":
        names = [[capsule_name(k, p // G, p % G) for p in range(G2)] for k in range(tr.types)]
        return {"x": list(range(1, G2 + 1)), "y": list(range(1, tr.types + 1)), "hover": names}
    rows = tr.c.shape[1] // G2
    names = [[t("capsule {i}", i=r * G2 + p + 1) for p in range(G2)] for r in range(rows)]
    return {"x": list(range(1, G2 + 1)), "y": list(range(1, rows + 1)), "hover": names}


def length_words(lengths: np.ndarray, winner: int, capsule: str, thing: str, name: str) -> str:
    """The caption of the lengths-by-iteration chart (lengths (T, J), as drawn). A length lies in
    0..1, so its trend is the bounded rule's (rules.bounded_trend)."""
    T = lengths.shape[0]
    said = t(
        "A {capsule}'s length is meant as the network's confidence that its {thing} is present (the prediction is the longest: {name}).",
        capsule=capsule,
        thing=thing,
        name=name,
    )
    if T == 1:
        return (
            said
            + " "
            + t(
                "Routing changes lengths by shifting votes; with one iteration nothing is shifted, and the winner's length is {length}.",
                length=f"{lengths[0, winner]:.3f}",
            )
        )
    first, last = float(lengths[0, winner]), float(lengths[-1, winner])
    return (
        said
        + " "
        + t(
            "Routing changes lengths by shifting votes; here the winner's length {trend}: {first} at iteration 1, {last} at "
            "iteration {T}, a change of {change} (a length lies between 0 and 1, so it rises or falls only when it moves by more "
            "than {level}).",
            trend=trend_words(lengths[:, winner], "{:.3f}", bounded=True),
            first=f"{first:.3f}",
            last=f"{last:.3f}",
            T=T,
            change=f"{last - first:+.3f}",
            level=f"{rules.LEVEL:.2f}",
        )
    )


ENTROPY_RANGE = (0.0, 105.0)  # the entropy chart's fixed y range, % of uniform: a small drop draws small


def entropy_figure(tr: DynamicTrace, capsule: str, thing: str) -> dict:
    """The entropy chart and its caption, along the axis the couplings sum to 1 over, as % of the
    uniform split's entropy, which the words call evenness (rules.EVENNESS): series (T, 3) mean, 10th
    and 90th percentile; names; title; axis (the y axis's words); caption; y_range (fixed) and line
    (the near-uniform rule's entropy share, dashed)."""
    T, I, J = tr.c.shape
    H = tr.uniform_entropy
    pct = 100 * tr.entropy / H
    mean = pct.mean(1, keepdims=True)
    series = np.concatenate([mean, np.percentile(pct, [10, 90], axis=1).T], 1)
    line = 100 * rules.NEAR_UNIFORM_ENTROPY
    title = t("Evenness of the couplings, %")  # short: a phone shows the whole title; the axis says what 100 is
    if tr.softmax == "inputs":
        what = t(
            "This model's couplings sum to 1 over the input capsules for each {capsule} (its softmax is over the inputs), so "
            "the chart shows how evenly a {capsule} draws on the {I} primary capsules, its evenness: 100% is spread evenly "
            "(1/{I} from each), 0% is all of it from one.",
            capsule=capsule,
            I=I,
        )
    else:
        what = t(
            "The chart shows how evenly each primary capsule spreads its vote over the {J} {capsule}s, its evenness: 100% is "
            "spread evenly (1/{J} to each {thing}), 0% is the whole vote to one {thing}.",
            J=J,
            capsule=capsule,
            thing=thing,
        )
    what += " " + t(
        "(Evenness is the entropy of the couplings as a share of an even split's.) The dashed line is {line}%, the evenness "
        "the near-uniform rule asks for.",
        line=f"{line:.0f}",
    )
    if T == 1:
        said = " " + t("With one iteration every split is still even.")
    else:
        said = " " + entropy_words(series[:, 0], line)
    return {
        "series": series,
        "names": [t("mean"), t("10th percentile"), t("90th percentile")],
        "title": title,
        "axis": t("evenness, % (100 = even)"),
        "caption": what + said,
        "y_range": ENTROPY_RANGE,
        "line": line,
    }


def entropy_words(means, line: float) -> str:
    """The mean coupling entropy (% of uniform) at iterations 1 to T (`means`, as the chart draws it)
    in words: its trend along the path (rules.path_trend) and the near-uniform verdict at T (entropy
    part), joined so that both read as true together. A level change that still ends below the
    `line` (the rule's entropy share, %) says plainly that it moved a little and which side of the
    line it ends on."""
    T = len(means)
    first, last = float(means[0]), float(means[-1])
    verb = rules.trend(first, last)
    change = abs(last - first) / max(abs(first), abs(last), 1e-12)
    near = rules.near_uniform(last / 100)
    v = dict(
        first=f"{first:.1f}",
        last=f"{last:.1f}",
        T=T,
        verdict=uniform_words(last / 100),
        change=f"{change:.1%}",
        level=f"{rules.LEVEL:.0%}",
    )
    if rules.turn(means) is not None:
        return t(
            "For this image the mean {trend}: {first}% at iteration 1, {last}% at iteration {T}; at iteration {T} its couplings "
            "are {verdict}.",
            trend=trend_words(means, "{:.1f}%"),
            **v,
        )
    if verb == "falls" and not near or verb == "rises" and near:
        words = (
            t(
                "For this image the mean falls by {change}: {first}% at iteration 1, {last}% at iteration {T}; so at iteration "
                "{T} its couplings are {verdict}.",
                **v,
            )
            if verb == "falls"
            else t(
                "For this image the mean rises by {change}: {first}% at iteration 1, {last}% at iteration {T}; so at iteration "
                "{T} its couplings are {verdict}.",
                **v,
            )
        )
        return words
    if verb == "falls":
        return t(
            "For this image the mean falls by {change}: {first}% at iteration 1, {last}% at iteration {T}; and at iteration {T} "
            "its couplings are {verdict}.",
            **v,
        )
    if verb == "rises":
        return t(
            "For this image the mean rises by {change}: {first}% at iteration 1, {last}% at iteration {T}; and at iteration {T} "
            "its couplings are {verdict}.",
            **v,
        )
    if near:
        return t(
            "For this image the mean moves only a little (a change of {change}; {level} or less counts as level): {first}% at "
            "iteration 1, {last}% at iteration {T}; so at iteration {T} its couplings are {verdict}.",
            **v,
        )
    v |= dict(points=f"{abs(last - first):.1f}", line=f"{line:.0f}")
    above = first > line
    if last < first:
        return (
            t(
                "For this image the mean falls slightly, by {points} points (a change of {change}; {level} or less counts as "
                "level): {first}% at iteration 1, {last}% at iteration {T}, ending below the {line}% line, which it started "
                "above, so by the near-uniform rule at iteration {T} its couplings are {verdict}.",
                **v,
            )
            if above
            else t(
                "For this image the mean falls slightly, by {points} points (a change of {change}; {level} or less counts as "
                "level): {first}% at iteration 1, {last}% at iteration {T}, below the {line}% line, as at iteration 1, so by "
                "the near-uniform rule at iteration {T} its couplings are {verdict}.",
                **v,
            )
        )
    if last > first:
        return (
            t(
                "For this image the mean rises slightly, by {points} points (a change of {change}; {level} or less counts as "
                "level): {first}% at iteration 1, {last}% at iteration {T}, ending below the {line}% line, which it started "
                "above, so by the near-uniform rule at iteration {T} its couplings are {verdict}.",
                **v,
            )
            if above
            else t(
                "For this image the mean rises slightly, by {points} points (a change of {change}; {level} or less counts as "
                "level): {first}% at iteration 1, {last}% at iteration {T}, below the {line}% line, as at iteration 1, so by "
                "the near-uniform rule at iteration {T} its couplings are {verdict}.",
                **v,
            )
        )
    return (
        t(
            "For this image the mean stays, by {points} points (a change of {change}; {level} or less counts as level): "
            "{first}% at iteration 1, {last}% at iteration {T}, ending below the {line}% line, which it started above, so by "
            "the near-uniform rule at iteration {T} its couplings are {verdict}.",
            **v,
        )
        if above
        else t(
            "For this image the mean stays, by {points} points (a change of {change}; {level} or less counts as level): "
            "{first}% at iteration 1, {last}% at iteration {T}, below the {line}% line, as at iteration 1, so by the "
            "near-uniform rule at iteration {T} its couplings are {verdict}.",
            **v,
        )
    )


def convergence_words(b_change: np.ndarray, c_change: np.ndarray) -> str:
    """Appendix A's caption from the series the chart draws: b_change (T,), c_change (T - 1,)."""
    T = len(b_change)
    if T >= 5:
        said = t(
            "Paper (Fig. A.1): the mean change of b falls roughly log-linearly, about 0.007 at iteration 2 and 1e-5 at "
            "iteration 5. Here, following Procedure 1 literally (b += u_hat . v), the change of b at iteration 2 is {b2} and "
            "at iteration 5 {b5} (it {trend}): each step adds the current agreement, which only vanishes when v does.",
            b2=f"{b_change[1]:.4f}",
            b5=f"{b_change[4]:.4f}",
            trend=trend_words(b_change[1:5], "{:.4f}", start=2),
        )
    else:
        said = t(
            "Paper (Fig. A.1): the mean change of b falls roughly log-linearly, about 0.007 at iteration 2 and 1e-5 at "
            "iteration 5. Here, following Procedure 1 literally (b += u_hat . v), the change of b each step adds the current "
            "agreement, which only vanishes when v does."
        )
    if len(c_change) >= 2:
        first, last = float(c_change[0]), float(c_change[-1])
        kind, _ = trend_outcome(c_change, "{:.1e}", start=2)
        v = dict(trend=trend_words(c_change, "{:.1e}", start=2), first=f"{first:.1e}", last=f"{last:.1e}", k=len(c_change) + 1)
        if kind == "falls":
            said += " " + t(
                "The couplings c = softmax(b) settle: their change per iteration {trend} ({first} at iteration 2, {last} at "
                "iteration {k}).",
                **v,
            )
        elif kind == "rises":
            said += " " + t(
                "The couplings c = softmax(b) keep moving more: their change per iteration {trend} ({first} at iteration 2, "
                "{last} at iteration {k}).",
                **v,
            )
        elif kind == "level":
            said += " " + t(
                "The couplings c = softmax(b) keep moving about as much: their change per iteration {trend} ({first} at "
                "iteration 2, {last} at iteration {k}).",
                **v,
            )
        else:
            said += " " + t(
                "The couplings c = softmax(b) do not settle steadily: their change per iteration {trend} ({first} at "
                "iteration 2, {last} at iteration {k}).",
                **v,
            )
    return said


def summary_words(cs: dict, k: int, trained: str) -> str:
    """The caption of the coupling-summary chart at iteration k (0-based), the slider's count;
    `trained`: what the model was trained with (trained_with_words)."""
    share, weighted, u = cs["coupling_to_prediction"][k], cs["vote_weighted_coupling_to_prediction"][k], cs["uniform"]
    ratio = cs["entropy"][k] / cs["uniform_entropy"]
    n = len(cs["coupling_to_prediction"])
    images = cs["n_images"]
    said = t(
        "The chart runs the {images} images with dynamic routing, 1 to {n} iterations; this model was trained with {trained}.",
        images=images,
        n=n,
        trained=trained,
    )
    if k == 0:
        verdict = t(
            "at iteration 1 nothing has been routed yet, so the couplings are uniform by construction: {uniform}",
            uniform=uniform_words(ratio),
        )
    elif cs.get("softmax") == "inputs":
        verdict = t("at iteration {k} the predicted class's couplings over the inputs are {uniform}", k=k + 1, uniform=uniform_words(ratio))
    else:
        verdict = t("at iteration {k} the couplings are {uniform}", k=k + 1, uniform=uniform_words(ratio, share, u))
    long = long_votes_words(t("the predicted class"), weighted, u, share)
    long = f" {long}" if long else ""
    if cs.get("softmax") == "inputs":
        return (
            said
            + " "
            + t(
                "Its couplings sum to 1 over the {I} input capsules for each class, so a primary capsule's mean coupling to the "
                "predicted class is the uniform {uniform} whatever routing does ({share} at iteration {k}); counting each vote by "
                "its length, {weighted}. Over the {images} images {verdict}.",
                I=round(1 / u),
                uniform=f"{u:.4f}",
                share=f"{share:.4f}",
                k=k + 1,
                weighted=f"{weighted:.4f}",
                images=images,
                verdict=verdict,
            )
            + long
        )
    return (
        said
        + " "
        + t(
            "At iteration {k}, the count chosen above, a primary capsule sends on average {share} of its vote to the predicted "
            "class (uniform: {uniform}); counting each vote by its length, {weighted}. Over the {images} images {verdict}.",
            k=k + 1,
            share=f"{share:.3f}",
            uniform=f"{u:.3f}",
            weighted=f"{weighted:.3f}",
            images=images,
            verdict=verdict,
        )
        + long
        + " "
        + t(
            "Routing only sharpens the couplings as far as the agreements u_hat . v are large: compare the 1- and 3-iteration "
            "models on the Reproduction page."
        )
    )


def attention_words(tr: AttentionTrace, winner: int, name: str) -> str:
    """The caption beside self-attention's couplings and prior (Efficient-CapsNet)."""
    I, J = tr.c.shape
    share = float(tr.c[:, winner].mean())
    ratio = float(tr.entropy.mean() / np.log(J))
    largest_c, largest_prior = float(tr.c.max()), float(np.abs(tr.prior).max())
    v = dict(
        I=I,
        name=name,
        share=f"{share:.2f}",
        uniform=f"{1 / J:.2f}",
        verdict=uniform_words(ratio, share, 1 / J),
        lo=f"{tr.prior.min():.2f}",
        hi=f"{tr.prior.max():.2f}",
        prior=f"{largest_prior:.2f}",
        c=f"{largest_c:.2f}",
    )
    if largest_prior >= largest_c:
        return t(
            "Each column is one of the {I} primary capsules (this model has no grid of positions: its primary capsules see the "
            "whole image). The primary capsules give **{name}** on average {share} of their vote (uniform: {uniform}); their "
            "couplings are {verdict}. The prior spans {lo} to {hi}: its largest size, {prior}, is as large as the largest "
            "coupling, {c}, so what the model learned about which capsule feeds which class counts as much as the routing of "
            "this image.",
            **v,
        )
    return t(
        "Each column is one of the {I} primary capsules (this model has no grid of positions: its primary capsules see the "
        "whole image). The primary capsules give **{name}** on average {share} of their vote (uniform: {uniform}); their "
        "couplings are {verdict}. The prior spans {lo} to {hi}: its largest size, {prior}, is below the largest coupling, "
        "{c}, so the routing of this image weighs more in the sums.",
        **v,
    )


def sweep_words(predictions: list[int], winner: int, name: str) -> str:
    """Self-attention's prediction against dynamic routing's with 1..T iterations."""
    changed = [k + 1 for k, p in enumerate(predictions) if p != winner]
    T = len(predictions)
    said = t("These weights were trained for self-attention routing; dynamic routing here uses them as they are (and Eq. 1's squash).")
    if changed:
        said += " " + t(
            "With dynamic routing the prediction differs from self-attention's at {changed} of {T} iteration counts.",
            changed=len(changed),
            T=T,
        )
    else:
        said += " " + t("With any number of dynamic-routing iterations the prediction stays {name}.", name=name)
    return said + " " + t("The **Routing lab** compares the routings over the whole test set.")


def dynamic_sweep_words(lengths: np.ndarray, predictions: list[int], T: int, names: list[str], capsule: str) -> str:
    """The caption of "Same weights, 1 to N iterations" for a dynamic-routing model: lengths (N, J) and
    predictions (N,) as drawn; T the count chosen above; names already plain."""
    N = len(predictions)
    p = predictions[T - 1]
    said = tn(
        "Each line is one {capsule}'s length after routing this image with 1 to {N} iterations, the weights unchanged; the "
        "longest is the prediction. With {n} iteration, as chosen above, the prediction is {name} (length {length}).",
        "Each line is one {capsule}'s length after routing this image with 1 to {N} iterations, the weights unchanged; the "
        "longest is the prediction. With {n} iterations, as chosen above, the prediction is {name} (length {length}).",
        T,
        capsule=capsule,
        N=N,
        name=names[p],
        length=f"{lengths[T - 1, p]:.3f}",
    )
    other = [k + 1 for k, q in enumerate(predictions) if q != p]
    if other:
        listed = t(", ").join(t("{k} ({name})", k=k, name=names[predictions[k - 1]]) for k in other)
        said += " " + t("The prediction differs at {count} of {N} counts: {listed}.", count=len(other), N=N, listed=listed)
    else:
        said += " " + t("It is {name} with every count from 1 to {N}.", name=names[p], N=N)
    return said


@dataclass
class EMTrace:
    """One image through a matrix-capsule model; class layer and convolutional layers recorded.

    R: (T, I, J), a: (T, J), sigma: (T, J, 16), mu: (T, J, 16), lambdas: (T,) for the class layer;
    distances: (T, I, J) from each vote to its capsule's mean pose at that iteration.
    layers: name -> EMRoutingResult of each routed layer (batch of one).
    """

    R: np.ndarray
    a: np.ndarray
    sigma: np.ndarray
    mu: np.ndarray
    lambdas: np.ndarray
    distances: np.ndarray
    layers: dict


@torch.no_grad()
def em_trace(model, image: np.ndarray, iterations: int) -> EMTrace:
    out = model.trace(as_batch(image), iterations)
    tr = out.trace
    V = tr.votes[0].float()  # (I, J, 16)
    mu = tr.mu_trace[:, 0].float()  # (T, J, 16)
    distances = (V.unsqueeze(0) - mu.unsqueeze(1)).norm(dim=-1)  # (T, I, J)
    return EMTrace(
        tr.R[:, 0].numpy(),
        tr.a_trace[:, 0].numpy(),
        tr.sigma[:, 0].numpy(),
        mu.numpy(),
        tr.lambdas.numpy(),
        distances.numpy(),
        out.layer_traces,
    )


def vote_histograms(trace: EMTrace, bins: np.ndarray) -> np.ndarray:
    """(T, J, len(bins) - 1): for each iteration and class, the R-weighted histogram of vote
    distances (Fig. 2 of Hinton et al.). Votes beyond the last bin are left out, as in a zoom."""
    T, I, J = trace.R.shape
    nb = len(bins) - 1
    k = np.searchsorted(bins, trace.distances, side="right") - 1  # (T, I, J) bin of each vote
    k[trace.distances == bins[-1]] = nb - 1  # the last bin is closed, as in np.histogram
    keep = (k >= 0) & (k < nb)
    slot = (np.arange(T)[:, None, None] * J + np.arange(J)[None, None, :]) * nb + k  # (T, I, J)
    counts = np.bincount(slot[keep], weights=trace.R[keep], minlength=T * J * nb)
    return counts.reshape(T, J, nb)
