"""What the routing inspector pages draw, computed from the core's recorded traces (numpy out)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import torch

from capsviz.analysis import as_batch, coupling_entropy, rules
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
    return (
        f"This model was trained on MultiMNIST: two training digits overlapping on a {size}x{size} canvas. Here it reads one digit "
        f"alone, centred on that canvas ({pad} blank pixels on each side of the 28x28 digit), as the routing lab reads it for its "
        "digit error. The **MultiMNIST** page follows pairs of digits."
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
        said = f"dynamic routing, {n} iteration{'s' if n != 1 else ''}"
        return said + (" (one pass: its couplings stayed uniform, so routing never moved them)" if n == 1 else "")
    return routing_words(config.couplings)


def once_words(tr: DynamicTrace) -> str:
    """What the page says when routing runs once (T = 1): only the coupling maps are flat."""
    return (
        "Routing runs once here, so there is nothing to step through: before the first agreement is added, every "
        f"set of couplings is even (c = {tr.uniform:.3g} each), so the coupling maps below are flat. The agreement map "
        "further down is not: it is what this one pass measured, what a second iteration would add to b. "
        "Raise **Routing iterations at inference** to watch the couplings move."
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
    """The span of couplings drawn, by the small-span rule (rules.small_span)."""
    if rules.small_span(lo, hi, uniform):
        return (
            f"the squares span only {lo:.{d}f} to {hi:.{d}f} (uniform: {uniform:.{d}f}), all within {rules.NEAR_UNIFORM_SHARE} "
            "times uniform either way, so the colours exaggerate small differences"
        )
    return f"the squares span {lo:.{d}f} to {hi:.{d}f} (uniform: {uniform:.{d}f}), from {times(lo / uniform)} to {times(hi / uniform)} times uniform"


def map_words(tr: DynamicTrace, t: int, capsule: str, thing: str, digits: bool, j: int, name: str) -> tuple[str, str]:
    """The coupling maps' title and caption at iteration t (0-based): where each square's number
    comes from (the model's grouping), the span of the couplings the maps draw, and beside class j's
    map (`name`, the one the detailed map shows) the span of its single primary capsules, the
    detailed map's own range."""
    maps = tr.coupling_maps(t)
    G = tr.grid
    title = f"Iteration {t + 1}: couplings c"
    if tr.grouping == "paper":
        where = (
            f"each square is one of the {G}x{G} positions of the primary capsules (rows and columns counted from 1 at the "
            f"top left), averaged over their {tr.types} types"
        )
    else:
        where = (
            f"a primary capsule of this model is {tr.dim} neighbouring values of one "
            "conv map (some straddle two maps), not one position's channels, so it has no one position: each square averages "
            "the couplings of the capsules built from the values at that position, each counted by its share of them"
        )
    d = _digits(tr)
    if flat(maps):
        spread = (
            f"At iteration 1 every coupling is {maps.max():.{d}f}: nothing has been routed yet."
            if t == 0
            else f"At iteration {t + 1} every coupling is still {maps.max():.{d}f}: the agreements added to b are too small to move them."
        )
    else:
        c = tr.c[t, :, j]
        spread = (
            f"At iteration {t + 1} {span_words(float(maps.min()), float(maps.max()), tr.uniform, d)}. These are averages: the "
            f"{name} map spans {maps[j].min():.{d}f} to {maps[j].max():.{d}f}, while its single primary capsules span "
            f"{c.min():.{d}f} to {c.max():.{d}f} at this iteration (the detailed map below shows them). Positions over blank "
            "background vote too: a bright square there means "
            f"those primary capsules' predictions happen to agree with that {thing}, not that "
            + ("ink is there." if digits else "the object is there.")
        )
    brighter = (
        f"that {capsule} draws a larger share of its input from that position (this model's couplings sum to 1 over the "
        "input capsules for each class)"
        if tr.softmax == "inputs"
        else f"that position sends a larger share of its vote to that {thing}"
    )
    caption = f"Each small map is one {capsule}; {where}. Brighter means {brighter}. {spread}"
    return title, caption


def detail_words(tr: DynamicTrace, t: int, j: int, name: str) -> tuple[str, str]:
    """The detailed map's title and caption: every primary capsule's coupling to class j at iteration t."""
    values = tr.c[t, :, j]
    d = _digits(tr)
    title = f"Coupling to {name}, iteration {t + 1}"
    if tr.grouping == "paper":
        what = (
            f"One square per primary capsule, not averaged: a column per position on the {tr.grid}x{tr.grid} grid, row by "
            f"row (1 = row 1, col 1 at the top left; {tr.grid * tr.grid} = row {tr.grid}, col {tr.grid}), a row per capsule "
            "type; hover for its type, row and column."
        )
    else:
        what = f"One square per primary capsule, not averaged, in the model's own order, {tr.grid * tr.grid} to a row."
    if np.ptp(values) < 1e-6:
        return title, f"{what} At iteration {t + 1} every one is {values.max():.{d}f}."
    return title, f"{what} At iteration {t + 1} {span_words(float(values.min()), float(values.max()), tr.uniform, d)}."


def capsule_axes(tr: DynamicTrace) -> tuple[str, str]:
    """The detailed maps' x and y axis titles (`DynamicTrace.by_capsule`), counted from 1."""
    G2 = tr.grid * tr.grid
    if tr.grouping == "paper":
        return f"position 1-{G2}, row by row", "capsule type"
    return f"capsule, {G2} to a row", "row"


def capsule_name(kind: int, row: int, col: int) -> str:
    """A primary capsule by type, row and column (0-based in), counted from 1 as the guided tour names it."""
    return f"type {kind + 1} at row {row + 1}, col {col + 1}"


def capsule_labels(tr: DynamicTrace) -> dict:
    """The detailed maps' axis values (from 1) and each square's name for the hover, laid out as
    `DynamicTrace.by_capsule` lays out the values."""
    G, G2 = tr.grid, tr.grid * tr.grid
    if tr.grouping == "paper":
        names = [[capsule_name(k, p // G, p % G) for p in range(G2)] for k in range(tr.types)]
        return {"x": list(range(1, G2 + 1)), "y": list(range(1, tr.types + 1)), "hover": names}
    rows = tr.c.shape[1] // G2
    names = [[f"capsule {r * G2 + p + 1}" for p in range(G2)] for r in range(rows)]
    return {"x": list(range(1, G2 + 1)), "y": list(range(1, rows + 1)), "hover": names}


def length_words(lengths: np.ndarray, winner: int, capsule: str, thing: str, name: str) -> str:
    """The caption of the lengths-by-iteration chart (lengths (T, J), as drawn). A length lies in
    0..1, so its trend is the bounded rule's (rules.bounded_trend)."""
    T = lengths.shape[0]
    said = (
        f"A {capsule}'s length is meant as the network's confidence that its {thing} is present (the prediction is the longest: "
        f"{name}). Routing changes lengths by shifting votes; "
    )
    if T == 1:
        return said + f"with one iteration nothing is shifted, and the winner's length is {lengths[0, winner]:.3f}."
    first, last = float(lengths[0, winner]), float(lengths[-1, winner])
    return said + (
        f"here the winner's length {rules.path_trend(lengths[:, winner], '{:.3f}', bounded=True)}: {first:.3f} at iteration 1, "
        f"{last:.3f} at iteration {T}, a change of {last - first:+.3f} (a length lies between 0 and 1, so it rises or falls only "
        f"when it moves by more than {rules.LEVEL:.2f})."
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
    title = "Evenness of the couplings, %"  # short: a phone shows the whole title; the axis says what 100 is
    if tr.softmax == "inputs":
        what = (
            f"This model's couplings sum to 1 over the input capsules for each {capsule} (its softmax is over the inputs), "
            f"so the chart shows how evenly a {capsule} draws on the {I} primary capsules, its evenness: 100% is spread evenly "
            f"(1/{I} from each), 0% is all of it from one."
        )
    else:
        what = (
            f"The chart shows how evenly each primary capsule spreads its vote over the {J} {capsule}s, its evenness: 100% is "
            f"spread evenly (1/{J} to each {thing}), 0% is the whole vote to one {thing}."
        )
    what += (
        " (Evenness is the entropy of the couplings as a share of an even split's.)"
        f" The dashed line is {line:.0f}%, the evenness the near-uniform rule asks for."
    )
    if T == 1:
        said = " With one iteration every split is still even."
    else:
        said = " " + entropy_words(series[:, 0], line)
    return {
        "series": series,
        "names": ["mean", "10th percentile", "90th percentile"],
        "title": title,
        "axis": "evenness, % (100 = even)",
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
    verdict = f"at iteration {T} its couplings are {rules.uniform_words(last / 100)}."
    both = f"{first:.1f}% at iteration 1, {last:.1f}% at iteration {T}"
    if rules.turn(means) is not None:
        return f"For this image the mean {rules.path_trend(means, '{:.1f}%')}: {both}; {verdict}"
    if verb != "stays about level":
        return f"For this image the mean {verb} by {change:.1%}: {both}; {'so' if (verb == 'falls') != near else 'and'} {verdict}"
    level = f"a change of {change:.1%}; {rules.LEVEL:.0%} or less counts as level"
    if near:
        return f"For this image the mean moves only a little ({level}): {both}; so {verdict}"
    how = "falls slightly" if last < first else "rises slightly" if last > first else "stays"
    side = "ending below the {:.0f}% line, which it started above" if first > line else "below the {:.0f}% line, as at iteration 1"
    return (
        f"For this image the mean {how}, by {abs(last - first):.1f} points ({level}): {both}, {side.format(line)}, so by the "
        f"near-uniform rule {verdict}"
    )


def convergence_words(b_change: np.ndarray, c_change: np.ndarray) -> str:
    """Appendix A's caption from the series the chart draws: b_change (T,), c_change (T - 1,)."""
    said = (
        "Paper (Fig. A.1): the mean change of b falls roughly log-linearly, about 0.007 at iteration 2 and 1e-5 at iteration 5. "
        "Here, following Procedure 1 literally (b += u_hat . v), "
    )
    T = len(b_change)
    if T >= 5:
        said += f"the change of b at iteration 2 is {b_change[1]:.4f} and at iteration 5 {b_change[4]:.4f}"
        said += f" (it {rules.path_trend(b_change[1:5], '{:.4f}', start=2)}): "
    else:
        said += "the change of b "
    said += "each step adds the current agreement, which only vanishes when v does."
    if len(c_change) >= 2:
        first, last = float(c_change[0]), float(c_change[-1])
        verb = rules.path_trend(c_change, "{:.1e}", start=2)
        how = {"falls": "settle", "rises": "keep moving more", "stays about level": "keep moving about as much"}.get(
            verb, "do not settle steadily"
        )
        said += (
            f" The couplings c = softmax(b) {how}: their change per iteration {verb} ({first:.1e} at iteration 2, "
            f"{last:.1e} at iteration {len(c_change) + 1})."
        )
    return said


def summary_words(cs: dict, k: int, trained: str) -> str:
    """The caption of the coupling-summary chart at iteration k (0-based), the slider's count;
    `trained`: what the model was trained with (trained_with_words)."""
    share, weighted, u = cs["coupling_to_prediction"][k], cs["vote_weighted_coupling_to_prediction"][k], cs["uniform"]
    ratio = cs["entropy"][k] / cs["uniform_entropy"]
    n = len(cs["coupling_to_prediction"])
    said = f"The chart runs the {cs['n_images']} images with dynamic routing, 1 to {n} iterations; this model was trained with {trained}. "
    if k == 0:
        verdict = f"at iteration 1 nothing has been routed yet, so the couplings are uniform by construction: {rules.uniform_words(ratio)}"
    elif cs.get("softmax") == "inputs":
        verdict = f"at iteration {k + 1} the predicted class's couplings over the inputs are {rules.uniform_words(ratio)}"
    else:
        verdict = f"at iteration {k + 1} the couplings are {rules.uniform_words(ratio, share, u)}"
    long = rules.long_votes_words("the predicted class", weighted, u, share)
    long = f" {long}" if long else ""
    if cs.get("softmax") == "inputs":
        return said + (
            f"Its couplings sum to 1 over the {round(1 / u)} input capsules for each class, so a primary capsule's mean "
            f"coupling to the predicted class is the uniform {u:.4f} whatever routing does ({share:.4f} at iteration {k + 1}); "
            f"counting each vote by its length, {weighted:.4f}. Over the {cs['n_images']} images {verdict}.{long}"
        )
    return said + (
        f"At iteration {k + 1}, the count chosen above, a primary capsule sends on average {share:.3f} of its vote "
        f"to the predicted class (uniform: {u:.3f}); counting each vote by its length, {weighted:.3f}. Over the "
        f"{cs['n_images']} images {verdict}.{long} Routing only sharpens the couplings "
        "as far as the agreements u_hat . v are large: compare the 1- and 3-iteration models on the Reproduction page."
    )


def attention_words(tr: AttentionTrace, winner: int, name: str) -> str:
    """The caption beside self-attention's couplings and prior (Efficient-CapsNet)."""
    I, J = tr.c.shape
    share = float(tr.c[:, winner].mean())
    ratio = float(tr.entropy.mean() / np.log(J))
    largest_c, largest_prior = float(tr.c.max()), float(np.abs(tr.prior).max())
    return (
        f"Each column is one of the {I} primary capsules (this model has no grid of positions: its primary capsules see the "
        f"whole image). The primary capsules give **{name}** on average {share:.2f} of their vote (uniform: {1 / J:.2f}); "
        f"their couplings are {rules.uniform_words(ratio, share, 1 / J)}. The prior spans {tr.prior.min():.2f} to "
        f"{tr.prior.max():.2f}: "
        + (
            f"its largest size, {largest_prior:.2f}, is as large as the largest coupling, {largest_c:.2f}, so what the model "
            "learned about which capsule feeds which class counts as much as the routing of this image."
            if largest_prior >= largest_c
            else f"its largest size, {largest_prior:.2f}, is below the largest coupling, {largest_c:.2f}, so the routing of this "
            "image weighs more in the sums."
        )
    )


def sweep_words(predictions: list[int], winner: int, name: str) -> str:
    """Self-attention's prediction against dynamic routing's with 1..T iterations."""
    changed = [k + 1 for k, p in enumerate(predictions) if p != winner]
    T = len(predictions)
    said = "These weights were trained for self-attention routing; dynamic routing here uses them as they are (and Eq. 1's squash). "
    if changed:
        said += f"With dynamic routing the prediction differs from self-attention's at {len(changed)} of {T} iteration counts."
    else:
        said += f"With any number of dynamic-routing iterations the prediction stays {name}."
    return said + " The **Routing lab** compares the routings over the whole test set."


def dynamic_sweep_words(lengths: np.ndarray, predictions: list[int], T: int, names: list[str], capsule: str) -> str:
    """The caption of "Same weights, 1 to N iterations" for a dynamic-routing model: lengths (N, J) and
    predictions (N,) as drawn; T the count chosen above; names already plain."""
    N = len(predictions)
    p = predictions[T - 1]
    said = (
        f"Each line is one {capsule}'s length after routing this image with 1 to {N} iterations, the weights unchanged; "
        f"the longest is the prediction. With {T} iteration{'s' if T != 1 else ''}, as chosen above, the prediction is "
        f"{names[p]} (length {lengths[T - 1, p]:.3f}). "
    )
    other = [k + 1 for k, q in enumerate(predictions) if q != p]
    if other:
        said += (
            f"The prediction differs at {len(other)} of {N} counts: " + ", ".join(f"{k} ({names[predictions[k - 1]]})" for k in other) + "."
        )
    else:
        said += f"It is {names[p]} with every count from 1 to {N}."
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
