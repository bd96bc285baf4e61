"""The guided tour: one image followed through a trained capsule network, step by step: a
dynamic-routing CapsNet, matrix capsules with EM routing, or Efficient-CapsNet with its one pass
of self-attention routing.

Everything a step shows comes from the model's own layers and routing functions run once on the
image, with every routing iteration recorded; the page only picks what to draw.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from capsviz.analysis import as_batch, coupling_entropy, rules
from capsviz.analysis.zoo import parameter_counts
from capsviz.glossary import DIGIT_WORDS, ClassWords, label
from capsviz.registry import ROUTINGS
from capsviz.routing import efficient_squash, squash
from capsviz.text import plain

SHOWN = 6  # primary capsules followed by name through routing: few enough to read their numbers
MAPS = 16  # Conv1 feature maps drawn


@dataclass
class Step:
    """One step of the tour as the page shows it: a figure drawn from `data`, and the sentences
    about it, computed here from the very numbers in `data` (tests check every number they quote).

    figure: which picture the page draws from `data` ("image", "maps", "arrows", "grid", "routing",
    "bars", "em_primary", "votes", "em", "lab", or "" for none); caption: under it, as plain text
    (the page escapes it); text: paragraphs of Markdown and measured: the boxed "Measured here"
    sentence (a warning when `warn`), with every user-given name already made plain; table: a few
    numbers as a table; terms: the glossary entries whose help goes under the step."""

    key: str  # stable name (tests, the URL stays a number)
    title: str
    figure: str = ""
    data: dict = field(default_factory=dict)
    caption: str = ""
    text: list[str] = field(default_factory=list)
    measured: str = ""
    warn: bool = False
    table: dict | None = None
    terms: tuple[str, ...] = ()
    link: tuple[str, str] | None = None  # (an app page, its label): where the step sends a student to see more


def capsnet_steps(iterations: int, words: ClassWords = DIGIT_WORDS, grid: int | None = None) -> list[Step]:
    """`words`: the model's (capsviz.glossary.class_words): digit capsules only for digits; `grid`:
    the side of the primary capsules' grid (ModelConfig.primary_grid), which depends on the input size."""
    article = "an" if str(grid).startswith("8") or grid in (11, 18) else "a"  # "an 8x8 grid"
    where = f"{article} {grid}x{grid} grid" if grid else "a grid of positions"
    return [
        Step("input", "The input"),
        Step("conv1", "Conv1: local features"),
        Step("primary", f"PrimaryCaps: vectors on {where}"),
        Step("predictions", f"Predictions u_hat for every {words.capsule}"),
        *[Step(f"iteration{t + 1}", f"Routing, iteration {t + 1} of {iterations}") for t in range(iterations)],
        Step("lengths", f"{'DigitCaps' if words.digits else 'Class capsules'}: lengths are the answer"),
        Step("reconstruction", f"The decoder redraws the {words.shown}"),
        Step("lab", "Does routing matter? This model in the routing lab"),
    ]


def matrix_steps(iterations: int) -> list[Step]:
    return [
        Step("input", "The input"),
        Step("primary", "Primary capsules: a pose matrix and an activation"),
        Step("votes", "Votes for every class capsule"),
        *[Step(f"iteration{t + 1}", f"EM routing, iteration {t + 1} of {iterations}") for t in range(iterations)],
        Step("activations", "Class capsules: activations are the answer"),
    ]


def efficient_steps(words: ClassWords = DIGIT_WORDS) -> list[Step]:
    return [
        Step("input", "The input"),
        Step("convs", "Four convolutions: local features"),
        Step("primary", "Primary capsules: vectors that see the whole image"),
        Step("predictions", "Predictions u_hat for every class capsule"),
        Step("routing", "Self-attention routing, in one pass"),
        Step("lengths", "Class capsules: lengths are the answer"),
        Step("reconstruction", f"The decoder redraws the {words.shown}"),
        Step("lab", "Does routing matter? This model in the routing lab"),
    ]


def _plane(vectors: torch.Tensor, first: torch.Tensor) -> torch.Tensor:
    """(2, D): an orthonormal basis whose first axis is `first` (so a dot product with it is
    exact in the picture) and whose second is the main remaining direction of `vectors` (N, D)."""
    e1 = first / first.norm().clamp_min(1e-12)
    rest = vectors - (vectors @ e1).unsqueeze(-1) * e1
    _, _, Vt = torch.linalg.svd(rest, full_matrices=False)
    e2 = Vt[0] - (Vt[0] @ e1) * e1
    return torch.stack([e1, e2 / e2.norm().clamp_min(1e-12)])


@dataclass
class CapsNetTour:
    """One image through a dynamic-routing CapsNet.

    conv1: (MAPS, H', W') the strongest Conv1 maps, conv1_ids their channels, conv1_total how many.
    primary_len: (G, G, types) primary capsule lengths; arrow_len (G, G) the longest per position,
    arrow_dir (G, G, 2) its direction projected on the two main directions of all primary vectors.
    shown: (SHOWN,) indices of the primary capsules followed; shown_names their places.
    b, c: (T, I, J); s, v: (T, J, D); lengths: (J,) final |v_j|; winner, runner_up: class ids.
    pred2d: (J, SHOWN, 2) the shown capsules' predictions for each class in that class's plane,
    s2d, v2d: (T, J, 2) each iteration's s_j and v_j in the same planes.
    """

    image: np.ndarray
    conv1: np.ndarray
    conv1_ids: np.ndarray
    conv1_total: int
    primary_len: np.ndarray
    arrow_len: np.ndarray
    arrow_dir: np.ndarray
    shown: np.ndarray
    shown_names: list[str]
    pred_len: np.ndarray  # (SHOWN, J) |u_hat_j|i| of the shown capsules
    b: np.ndarray
    c: np.ndarray
    s: np.ndarray
    v: np.ndarray
    lengths: np.ndarray
    winner: int
    runner_up: int
    pred2d: np.ndarray
    s2d: np.ndarray
    v2d: np.ndarray
    reconstruction: np.ndarray | None
    grid: int
    types: int
    pred_all_len: np.ndarray  # (I, J) |u_hat_j|i| of every primary capsule
    # the model's own answer, routed as it was trained (its couplings and iterations): its lengths
    # (J,), their winner and runner-up; `own` says whether that routing is the one the tour shows
    own: bool = True
    own_lengths: np.ndarray | None = None
    own_winner: int = 0
    own_runner_up: int = 0

    @property
    def iterations(self) -> int:
        return len(self.c)

    @property
    def s_len(self) -> np.ndarray:
        """(T, J) |s_j| of the full 16 numbers (the figure's planes show projections of s)."""
        return np.linalg.norm(self.s, axis=-1)

    @property
    def v_len(self) -> np.ndarray:
        """(T, J) |v_j|."""
        return np.linalg.norm(self.v, axis=-1)

    @property
    def entropy(self) -> np.ndarray:
        """(T, I) each primary capsule's coupling entropy over log J at each iteration (1 = uniform)."""
        return coupling_entropy(self.c) / np.log(self.c.shape[-1])


@torch.no_grad()
def capsnet_tour(model, image: np.ndarray, iterations: int | None = None) -> CapsNetTour:
    cfg = model.config
    T = iterations or cfg.routing_iterations
    x = as_batch(image)
    h = model.features(x)[0]  # (H', W', C) after ReLU
    strength = h.mean((0, 1))  # (C,)
    ids = strength.argsort(descending=True)[:MAPS]
    conv1 = h[:, :, ids].permute(2, 0, 1)  # (MAPS, H', W')
    u = model.primary_capsules(x)  # (1, I, 8)
    G, K = cfg.primary_grid, cfg.primary_types
    lengths_u = u[0].norm(dim=-1)  # (I,)
    per_cell = lengths_u.view(G, G, K)
    best = per_cell.argmax(-1)  # (G, G)
    vectors = u[0].view(G, G, K, -1)
    chosen = vectors.gather(2, best.view(G, G, 1, 1).expand(G, G, 1, vectors.shape[-1])).squeeze(2)  # (G, G, 8)
    _, _, Vt = torch.linalg.svd(u[0] - u[0].mean(0), full_matrices=False)
    flat = chosen.reshape(-1, chosen.shape[-1]) @ Vt[:2].T  # (G*G, 2): the two main directions of this image's pose vectors
    direction = flat / flat.norm(dim=-1, keepdim=True).clamp_min(1e-12)

    u_hat = model.digits(u)  # (1, J, I, D)
    r = model.route(u_hat, routing="dynamic", iterations=T, record=True)  # with the model's own routing options
    c = r.c[:, 0]  # (T, I, J)
    s = torch.einsum("tij,jid->tjd", c, u_hat[0])  # (T, J, D): Eq. 2 with routing's own couplings
    v = r.v_trace[:, 0]  # (T, J, D)
    final = v[-1].norm(dim=-1)  # (J,)
    order = final.argsort(descending=True)
    winner, runner = int(order[0]), int(order[1])
    pred_len = u_hat[0].norm(dim=-1).T  # (I, J)
    shown = pred_len[:, winner].argsort(descending=True)[:SHOWN]  # the loudest predictions for the winner

    J = u_hat.shape[1]
    pred2d = torch.zeros(J, SHOWN, 2)
    s2d, v2d = torch.zeros(len(c), J, 2), torch.zeros(len(c), J, 2)
    for j in range(J):
        P = _plane(u_hat[0, j], v[-1, j])  # (2, D)
        pred2d[j] = u_hat[0, j, shown] @ P.T
        s2d[:, j] = s[:, j] @ P.T
        v2d[:, j] = v[:, j] @ P.T
    names = [f"type {int(i) % K + 1} at row {int(i) // K // G + 1}, col {int(i) // K % G + 1}" for i in shown]
    own = getattr(cfg, "couplings", "dynamic") == "dynamic" and T == cfg.routing_iterations
    answer = v[-1] if own else model.route(u_hat).v[0]  # (J, D): the model's forward pass as trained
    answer_len = answer.norm(dim=-1)
    own_order = answer_len.argsort(descending=True)
    own_w = int(own_order[0])
    rec = model.decode(answer[own_w], own_w)[0].numpy() if model.decoder is not None else None  # the decoder reads its own answer
    return CapsNetTour(
        image=np.asarray(image, np.float32),
        conv1=conv1.numpy(),
        conv1_ids=ids.numpy(),
        conv1_total=int(h.shape[-1]),
        primary_len=per_cell.numpy(),
        arrow_len=per_cell.max(-1).values.numpy(),
        arrow_dir=direction.view(G, G, 2).numpy(),
        shown=shown.numpy(),
        shown_names=names,
        pred_len=pred_len[shown].numpy(),
        b=r.b[:, 0].numpy(),
        c=c.numpy(),
        s=s.numpy(),
        v=v.numpy(),
        lengths=final.numpy(),
        winner=winner,
        runner_up=runner,
        pred2d=pred2d.numpy(),
        s2d=s2d.numpy(),
        v2d=v2d.numpy(),
        reconstruction=rec,
        grid=G,
        types=K,
        pred_all_len=pred_len.numpy(),
        own=own,
        own_lengths=answer_len.numpy(),
        own_winner=own_w,
        own_runner_up=int(own_order[1]),
    )


def squashed(s: np.ndarray) -> np.ndarray:
    return squash(torch.as_tensor(s)).numpy()


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
    names = [f"{CLASS_LAYER_IN} type {int(i) % K2 + 1} at row {int(i) // K2 // W2 + 1}, col {int(i) // K2 % W2 + 1}" for i in shown]
    T = tr.R.shape[0]
    votes2d = torch.zeros(J, SHOWN, 2)
    mu2d, sigma2d = torch.zeros(T, J, 2), torch.zeros(T, J, 2)
    mu, sigma = tr.mu_trace[:, 0].float(), tr.sigma[:, 0].float()  # (T, J, 16)
    for j in range(J):
        centre = mu[-1, j]
        P = _plane(votes[:, j] - centre, votes[shown, j].mean(0) - centre + 1e-6)  # (2, 16)
        votes2d[j] = (votes[shown, j] - centre) @ P.T
        mu2d[:, j] = (mu[:, j] - centre) @ P.T
        sigma2d[:, j] = ((P**2) @ (sigma[:, j] ** 2).T).T.sqrt()  # the spread along each drawn axis
    return MatrixTour(
        image=np.asarray(image, np.float32),
        primary_a=a[0].numpy(),
        pose=pose[0, r_, c_, k_].view(4, 4).numpy(),
        pose_where=f"PrimaryCaps type {k_ + 1} at row {r_ + 1}, col {c_ + 1}",
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


# ---------- the steps as the page shows them: figure data and the sentences about it ----------

SATURATED = 0.9  # a primary capsule longer than this is called long (the margin loss's own target for "present")


def two(x: float) -> str:
    """The tour's numbers as its figures write them: two decimals."""
    return f"{x:.2f}"


def share_words(x: np.ndarray) -> str:
    """'0.14 to 0.23', or '1.00 each' when they are all the same at two decimals."""
    lo, hi = two(x.min()), two(x.max())
    return f"{lo} each" if lo == hi else f"{lo} to {hi}"


def squash_words(s_name: str, v_name: str, s_len: float, v_len: float, length: Callable[[float], float]) -> str:
    """'|s_7| = 2.38 squashes to |v_7| = 0.85', both as the figure writes them; when squashing the
    rounded |s| does not give the rounded |v| (`length`: the squash on a length), it says so."""
    said = f"|{s_name}| = {two(s_len)} squashes to |{v_name}| = {two(v_len)}"
    if two(length(float(two(s_len)))) != two(v_len):
        said += " (both rounded to two decimals: the squash acts on the unrounded length)"
    return said


def capsnet_length(n: float) -> float:
    """Eq. 1 of Sabour et al. on a length: |v| = |s|^2 / (1 + |s|^2)."""
    return n * n / (1 + n * n)


def efficient_length(n: float) -> float:
    """Efficient-CapsNet's squash on a length: |v| = 1 - e^-|s|."""
    return 1 - float(np.exp(-n))


def near_uniform_words(entropy_ratio: float, share: float, uniform_share: float, who: str, stated_at: str = "") -> str:
    """`who` ('the couplings of this image') near or away from uniform by the rules' one rule, with
    the part that decided it, and the whole rule; or, where an earlier step said it (`stated_at`,
    'iteration 2'), a pointer to that step instead of the same four lines again."""
    verdict = f"{who} are {rules.uniform_words(entropy_ratio, share, uniform_share)}."
    if stated_at:
        return f"By the routing lab's near-uniform rule (stated in full at {stated_at}), {verdict}"
    return f"By the routing lab's rule, {verdict} {rules.RULES['near uniform']}"


def long_share(lengths: np.ndarray) -> float:
    """The share of primary capsules longer than SATURATED."""
    return float((lengths > SATURATED).mean())


def trained_words(couplings: str, trained_iterations: int, shown_iterations: int) -> tuple[str, bool]:
    """What a CapsNet was trained with, as every page names it (capsviz.analysis.zoo), and whether
    the `shown_iterations` of dynamic routing the tour shows are its own. `couplings`: its
    config's couplings ("dynamic", "uniform", "random")."""
    from capsviz.analysis.lab import LAB_ROUTINGS
    from capsviz.registry import ONE_ITERATION, ONE_ITERATION_WHY

    if couplings != "dynamic":
        return LAB_ROUTINGS.get(couplings, f"{couplings} couplings"), False
    if trained_iterations == 1:
        return f"{ONE_ITERATION} ({ONE_ITERATION_WHY})", shown_iterations == 1
    return f"dynamic routing, {trained_iterations} iterations", shown_iterations == trained_iterations


def not_own_words(trained: str) -> str:
    """Said wherever the tour shows dynamic routing on a model trained otherwise."""
    return f"This model was trained with {trained}; the tour shows what dynamic routing would do with its weights."


def own_answer_words(trained: str, routed_name: str, routed_length: str, same: bool) -> str:
    """The lengths step of a model trained without the dynamic routing the steps before showed:
    the bars are its own answer; where dynamic routing's longest capsule stands."""
    return (
        f"This model was trained with {trained}, so these bars are its own answer, computed with those couplings as in training. "
        f"The routing steps before showed what dynamic routing would do with its weights: there {routed_name} was longest, with {routed_length}"
        + (", the same winner." if same else ", another winner.")
    )


def pose_words(pose: np.ndarray) -> str:
    """What a learned 4x4 pose matrix's entries show, as its table writes them: their range; whether
    any lies beyond -1 to 1, where a rotation matrix's entries all lie (so it is not one); within,
    that this alone does not make it one. Meaning is claimed for no entry."""
    lo, hi = float(pose.min()), float(pose.max())
    said = f"Measured here: the 16 entries of this pose run from {lo:.3f} to {hi:.3f}"  # as its table writes them
    if max(abs(lo), abs(hi)) > 1:
        return said + (
            "; a rotation matrix keeps every entry between -1 and 1, so this is not one: the paper means the matrix to hold "
            "the pose, and what each entry encodes is learned, not given."
        )
    return said + (
        ", all between -1 and 1 as a rotation matrix's would be, though that alone does not make it one: what each entry "
        "encodes is learned, not given."
    )


def ordinal(n: int) -> str:
    return {1: "first", 2: "second", 3: "third"}.get(n, f"{n}th")


def prediction_words(name: str, lengths: np.ndarray, names: list[str], W: int, thing: str, own: float | None = None) -> str:
    """What one primary capsule's prediction lengths (J,), the table's first column, say about class W: the longest of its
    predictions, where W's stands among them, and the shortest, each as the grid beside writes it; with `own`, the
    capsule's own length |u_i|, that W alone makes them differ; where W's is not the longest, that a longer vote does
    not count for more by its length (its coupling decides)."""
    order = [int(j) for j in np.argsort(-lengths, kind="stable")]
    rank, top, low = order.index(W) + 1, order[0], order[-1]
    whose = f", whose own length |u_i| is {two(own)}," if own is not None else ""
    said = f"Measured here: the first column, {name}{whose} predicts {names[W]} with length {two(lengths[W])}"
    if rank == 1:
        nxt = order[1]
        said += f", its longest prediction; the next longest is for {names[nxt]} ({two(lengths[nxt])})"
    else:
        said += f", only its {ordinal(rank)} longest: its longest prediction is for {names[top]} ({two(lengths[top])})" + (
            f", then {names[order[1]]} ({two(lengths[order[1]])})" if rank > 2 else ""
        )
    said += f"; its shortest is for {names[low]} ({two(lengths[low])}): one capsule predicts every {thing}, some louder than others"
    said += ", from one vector and a different W for each." if own is not None else "."
    if rank == 1:
        return said + f" Here its longest vote is for {names[W]}, the {thing} routing picks; a vote's weight still comes from its coupling."
    return said + (
        f" Its vote for {names[top]} is longer than its vote for {names[W]}, yet {names[W]} is the {thing} routing picks: "
        f"length alone does not decide, the couplings and the other capsules' votes do."
    )


MARGIN_PRESENT, MARGIN_ABSENT = 0.9, 0.1  # the margin loss's targets m+ and m- (Eq. 4 of Sabour et al.)


def margin_words(lengths: np.ndarray, names: list[str], right: int | None) -> str:
    """Whether the lengths (J,) meet the margin loss's targets: the capsule of the label `right`
    (the longest where the label is unknown) longer than MARGIN_PRESENT, every other shorter than
    MARGIN_ABSENT; the numbers that decide it, as the bars beside write them."""
    j = int(np.argmax(lengths)) if right is None else right
    who = f"the label's capsule, {names[j]}," if right is not None else f"the longest capsule, {names[j]},"
    others = [k for k in range(len(lengths)) if k != j]
    top = max(others, key=lambda k: lengths[k])
    loud = [k for k in others if lengths[k] >= MARGIN_ABSENT]
    present = lengths[j] > MARGIN_PRESENT
    said = f"on this image {who} has {two(lengths[j])}, {'above' if present else 'not above'} {MARGIN_PRESENT}; "
    if not loud:
        said += f"every other is shorter than {MARGIN_ABSENT} (the longest of them, {names[top]}, {two(lengths[top])})"
    else:
        said += (
            f"{len(loud)} of the other {len(others)} {'is' if len(loud) == 1 else 'are'} not shorter than {MARGIN_ABSENT} "
            f"(the longest, {names[top]}, {two(lengths[top])})"
        )
    met = present and not loud
    return said + (
        ": this image meets both targets." if met else ": this image does not meet the targets, so the loss would still push these lengths."
    )


def saturation_words(lengths: np.ndarray, shown: str) -> tuple[str, bool]:
    """What the primary capsules' lengths say, and whether it is a warning (most of them long)."""
    long = long_share(lengths)
    said = (
        f"Measured here: {long:.0%} of the {lengths.size} primary capsules are longer than {SATURATED} "
        f"(lengths {two(lengths.min())} to {two(lengths.max())})"
    )
    if long > 0.5:
        return (
            said + f". Most of them are then nearly equally long, so in this trained model a primary capsule's length hardly "
            f"tells where the {shown} is; what differs between them is their direction, and so the predictions they make (next step).",
            True,
        )
    return said + ".", False


def coupling_numbers(c: np.ndarray, entropy: np.ndarray, weights: np.ndarray, j: int) -> dict:
    """What the text says of one iteration's couplings to class j: c (I, J); entropy (I,) over log J;
    weights (I,) each capsule's prediction length for j. -> the mean coupling to j, the same weighted
    by prediction length, each as a multiple of uniform (1/J), and the mean entropy ratio."""
    J = c.shape[1]
    mean, weighted = float(c[:, j].mean()), float((c[:, j] * weights).sum() / max(weights.sum(), 1e-12))
    return {
        "mean": mean,
        "weighted": weighted,
        "mean_times": mean * J,
        "weighted_times": weighted * J,
        "entropy_mean": float(entropy.mean()),
    }


def loudest_words(shown_c: np.ndarray, mean: float, capsules: int, J: int, name: str) -> str:
    """The shown (loudest) capsules' couplings to class `name` and the mean over all `capsules` in one
    sentence that reconciles them: by the near-uniform rule's factor, whether the loudest few moved
    while the mean, which the rule reads, stayed below it; or neither moved; or the mean moved too."""
    u, factor = 1 / J, rules.NEAR_UNIFORM_SHARE
    few, loud = len(shown_c), share_words(shown_c)
    said = f"Measured here: the {few} loudest predictions for {name} are coupled to it by {loud}"
    every = f"averaged over all {capsules:,} primary capsules the coupling to {name} is {mean:.3f} (uniform {u:.3f})"
    reach = "All" if (shown_c >= factor * u).all() else str(int((shown_c >= factor * u).sum()))
    if float(shown_c.max()) >= factor * u and mean < factor * u:
        return (
            f"{said}, but they are {few} of {capsules:,}: {every}. {reach} of the {few} loudest {'reaches' if reach == '1' else 'reach'} {factor} times "
            f"uniform or more (up to {two(shown_c.max())}), yet the mean over all {capsules:,}, which the near-uniform "
            f"rule reads, stays below {factor} times uniform."
        )
    if mean >= factor * u:
        return f"{said}; {every}: the mean has moved to {factor} times uniform or more, not only the loudest few."
    return f"{said}; {every}: neither the loudest few nor the mean has reached {factor} times uniform."


def coupling_words(t: int, numbers: dict, shown_c: np.ndarray, capsules: int, J: int, name: str, stated_at: str = "") -> str:
    """Iteration t's couplings to class `name`: the shown capsules' (`shown_c`) beside the mean over
    all `capsules` (loudest_words), the mean weighted by prediction length (`numbers`, from
    coupling_numbers), and after iteration 1 near uniform or not by the rule (said in full unless
    an earlier step did, `stated_at`)."""
    mean, weighted = numbers["mean"], numbers["weighted"]
    if t == 0:
        return (
            f"Measured here: the {len(shown_c)} loudest predictions for {name} are coupled to it by {share_words(shown_c)}; "
            f"averaged over all {capsules:,} primary capsules the coupling to {name} is {mean:.3f} (uniform {1 / J:.3f}), "
            f"{weighted:.3f} weighted by prediction length."
        )
    said = loudest_words(shown_c, mean, capsules, J, name) + f" Weighted by prediction length the mean is {weighted:.3f}."
    said += " " + near_uniform_words(numbers["entropy_mean"], mean, 1 / J, "all the primary capsules' couplings together", stated_at)
    long = rules.long_votes_words(name, weighted, 1 / J, mean)
    return said + (f" {long}" if long else "")


def _verdict(gap: float, band: float, beyond: bool, up: str) -> str:
    """The end of a lab-step sentence on a gap between two rates: within chance, or `up` ("worse"
    for errors, "better" for accuracies) when positive beyond chance."""
    if not beyond:
        return f"a gap of {two(abs(gap))} points, within the ±{two(band)} chance gives, so no better or worse."
    down = "better" if up == "worse" else "worse"
    return f"{two(abs(gap))} points {up if gap > 0 else down}, more than the ±{two(band)} chance gives."


def lab_words(rows: list, routing_words: dict[str, str], stated_at: str = "") -> tuple[list[str], dict]:
    """The lab step's answer from the lab's stored rows for one model (capsviz.analysis.lab.Row, one
    per routing it was run with): each other routing's test error against the model's own, beyond
    chance or not; the tallest bar; how far its own routing moves the couplings from uniform (the
    near-uniform rule in full unless an earlier step said it, `stated_at`). -> (sentences, the
    numbers they quote beside the figure's)."""
    own = next((r for r in rows if r.run_with == r.trained_with), None)
    if own is None:
        return [], {}
    said, gaps = [], {}
    # its own routing by the lab's words, except one iteration of dynamic routing, which keeps its own name
    mine = own.trained if own.trained != own.trained_with else routing_words.get(own.run_with, own.run_with)
    for r in rows:
        if r is own:
            continue
        gap, band = r.test_error - own.test_error, rules.noise(r.test_error, r.n_test, own.test_error, own.n_test)
        gaps[r.run_with] = (abs(gap), band)
        images = "test images" if r.pair_accuracy is None else "single test digits"
        head = (
            f"Run with {routing_words.get(r.run_with, r.run_with)}, the model misclassifies {two(r.test_error)}% of "
            f"{r.n_test:,} {images}, against {two(own.test_error)}% with its own {mine}: "
        )
        said.append(head + _verdict(gap, band, rules.beyond_chance(r.test_error, r.n_test, own.test_error, own.n_test), "worse"))
        if r.pair_accuracy is not None and own.pair_accuracy is not None and r.n_pairs and own.n_pairs:
            pair_gap = r.pair_accuracy - own.pair_accuracy
            pair_band = rules.noise(r.pair_accuracy, r.n_pairs, own.pair_accuracy, own.n_pairs)
            gaps[r.run_with + " pairs"] = (abs(pair_gap), pair_band)
            said.append(
                f"On pairs of overlapping digits, the task it was trained for (and what the routing lab judges it by), it gets "
                f"{two(r.pair_accuracy)}% of {r.n_pairs:,} test pairs right, against {two(own.pair_accuracy)}% with its own {mine}: "
                + _verdict(pair_gap, pair_band, rules.beyond_chance(r.pair_accuracy, r.n_pairs, own.pair_accuracy, own.n_pairs), "better")
            )
    tallest = max(rows, key=lambda r: r.test_error)
    if tallest is not own and rules.beyond_chance(tallest.test_error, tallest.n_test, own.test_error, own.n_test):
        why = ROUTINGS[tallest.run_with].about if tallest.run_with in ROUTINGS else "the couplings are set another way"
        said.append(
            f"The tallest {'test-error ' if own.pair_accuracy is not None else ''}bar is "
            f"{routing_words.get(tallest.run_with, tallest.run_with)} ({two(tallest.test_error)}%): {why}, "
            f"while this model was trained with {mine}: its weights W learned to make "
            "predictions for those couplings, not for these."
        )
    if own.run_with in ROUTINGS and ROUTINGS[own.run_with].from_votes:
        said.append(
            f"Averaged over the lab's test images, a primary capsule gives the predicted class {two(own.coupling_to_prediction)} "
            f"of its vote with {routing_words.get(own.run_with, own.run_with)} (uniform: {two(1 / own.classes)}). "
            + near_uniform_words(own.entropy_ratio, own.coupling_to_prediction, 1 / own.classes, "its couplings", stated_at)
        )
    return said, {"gaps": [g for pair in gaps.values() for g in pair]}


def lab_step(step: Step, rows: list, routing: str, model_name: str, iterations: int = 1, classes: int = 10, stated_at: str = "") -> Step:
    """The last step of a vector-capsule tour: the lab's stored test errors for this model, each routing a bar.
    `iterations`: the routing iterations the tour showed; `classes`: J; `stated_at`: the step that said the
    near-uniform rule in full, if one did."""
    from capsviz.analysis.lab import LAB_ROUTINGS

    if routing == "self-attention":
        asked = f"You have watched self-attention set each {label('c')} in one pass."
    elif iterations == 1:
        asked = f"You have watched every {label('c')} stay at 1/{classes}: with one iteration, routing never updates them."
    else:
        asked = f"You have watched {label('c')} change from one routing iteration to the next."
    text = [
        asked + " The field's own question is whether that matters: would the same capsules do as well with every vote split "
        "evenly (uniform couplings, no routing), or split at random?"
    ]
    if not rows:
        return replace(
            step,
            text=text,
            measured="The routing lab has not measured this model yet: open it and press **Run the lab** (a minute or two).",
            terms=("uniform", "random_couplings"),
        )
    said, quoted = lab_words(rows, LAB_ROUTINGS, stated_at)
    data = {
        "routings": [r.run_with for r in rows],
        "error": [r.test_error for r in rows],
        "spread": [rules.spread(r.test_error, r.n_test) for r in rows],
        "n_test": rows[0].n_test,
        "entropy": [r.entropy_ratio for r in rows],
        "share": [r.coupling_to_prediction for r in rows],
        "uniform": [1 / r.classes for r in rows],
        **quoted,
    }
    if all(r.pair_accuracy is not None and r.n_pairs for r in rows):  # a model that reads pairs: its own task beside
        data |= {
            "pairs": [r.pair_accuracy for r in rows],
            "pair_spread": [rules.spread(r.pair_accuracy, r.n_pairs) for r in rows],
            "n_pairs": rows[0].n_pairs,
        }
    return replace(
        step,
        figure="lab",
        data=data,
        caption=(
            f"{model_name} run with each routing: test error (%) on {rows[0].n_test:,} test images"
            + (f" (single digits), and pair accuracy (%) on {rows[0].n_pairs:,} test pairs" if "pairs" in data else "")
            + ". Error bars: two standard errors, how far the test images alone can move each number."
        ),
        text=text + said,
        terms=("uniform", "random_couplings"),
    )


def _input_step(step: Step, image: np.ndarray, truth: str, looks: str, text: list[str]) -> Step:
    return replace(step, figure="image", data={"images": [image], "labels": [f"label: {truth}"]}, caption=looks, text=text)


def _lengths_step(
    step: Step, lengths: np.ndarray, names: list[str], W: int, R: int, truth: str, capsule: str, title: str, text: list[str]
) -> Step:
    right = names.index(truth) if truth in names else None  # an image without a known label: the longest capsule
    lines = {f"{MARGIN_PRESENT}": MARGIN_PRESENT, f"{MARGIN_ABSENT}": MARGIN_ABSENT}
    return replace(
        step,
        figure="bars",
        data={"values": lengths, "names": names, "highlight": W, "title": title, "axis": "length", "lines": lines}
        | ({} if right is None else {"label": right}),  # the capsule the margin loss wants long
        caption="dotted: the margin loss's targets",
        text=[
            f"The answer is the longest {capsule}: **{plain(names[W])}** with length "
            f"{two(lengths[W])} (label: {plain(truth)}); the runner-up, {plain(names[R])}, has {two(lengths[R])}.",
            *text,
        ],
        measured="Measured here: " + margin_words(lengths, [plain(n) for n in names], right),
        terms=("margin_loss", "length"),
    )


def _reconstruction_step(step: Step, image: np.ndarray, rec: np.ndarray | None, name: str, D: int, family: str, text: list[str]) -> Step:
    if rec is None:
        return replace(step, measured=f"This {family} was trained without a decoder, so there is nothing to redraw.", text=text)
    return replace(
        step,
        figure="image",
        data={"images": [image, rec], "labels": ["input", f"redrawn from capsule {name}"]},
        caption=f"the decoder sees only the winning capsule's {D} numbers",
        text=text,
    )


def capsnet_walk(
    tour: CapsNetTour,
    names: list[str],
    words: ClassWords,
    model_name: str,
    truth: str,
    looks: str,
    lab_rows: list,
    trained: tuple[str, bool] | None = None,
) -> list[Step]:
    """Every step of a CapsNet's tour with dynamic routing, its figure's data and its sentences.
    `trained`: what the model was trained with and whether the tour's iterations are its own
    (trained_words); None: the iterations shown."""
    trained_with, own = trained or trained_words("dynamic", tour.iterations, tour.iterations)
    pn = [plain(n) for n in names]
    W, R, G, K = tour.winner, tour.runner_up, tour.grid, tour.types
    J, I, D = len(names), tour.c.shape[1], tour.v.shape[-1]
    out = []
    for step in capsnet_steps(tour.iterations, words, G):
        k = step.key
        if k == "input":
            step = _input_step(
                step,
                tour.image,
                truth,
                looks,
                [
                    f"This is the image the tour follows through **{plain(model_name)}**, a CapsNet (Sabour et al. 2017, Fig. 1) "
                    f"trained with {trained_with}. It will pass three layers: an ordinary convolution, a layer of primary capsules "
                    f"and one {words.capsule} per class, with routing between the two capsule layers. "
                    + (
                        ""
                        if own
                        else not_own_words(trained_with)
                        + " Its answer at the end (the lengths step) and the drawing redrawn from it are its own, with its own couplings. "
                    )
                    + "A capsule outputs a vector, not a number: its length is meant to say how likely its thing is present, its direction how it looks."
                ],
            )
        elif k == "conv1":
            step = replace(
                step,
                figure="maps",
                data={"maps": tour.conv1, "names": [f"filter {i}" for i in tour.conv1_ids]},
                caption="bright = the filter responds there (each map scaled to its own maximum)",
                text=[
                    f"{label('conv1')} slides {tour.conv1_total} filters of 9x9 pixels over the image and keeps the positive responses (ReLU). "
                    f"Here the {len(tour.conv1_ids)} maps that respond most: local features such as edges{' and stroke ends' if words.digits else ''}. "
                    "These are still ordinary neurons, one number per place: *whether* a feature is there, not yet *how* it sits."
                ],
            )
        elif k == "primary":
            measured, warn = saturation_words(tour.primary_len, words.shown)
            if not warn:
                top = np.unravel_index(tour.primary_len.argmax(), tour.primary_len.shape)
                measured += (
                    f" The longest is type {top[2] + 1} at row {top[0] + 1}, col {top[1] + 1} (length {two(tour.primary_len[top])})."
                )
            step = replace(
                step,
                figure="arrows",
                data={
                    "lengths": tour.arrow_len,
                    "directions": tour.arrow_dir,
                    "all_lengths": tour.primary_len,
                    "long": long_share(tour.primary_len),
                    "grid": G,
                    "types": K,
                },
                caption=f"at each of the {G}x{G} positions, the longest of its {K} capsules: arrow length = its length |u_i| (presence), arrow direction = its pose",
                text=[
                    f"{label('primary')}: a second convolution whose outputs are grouped into {tour.primary_len.size} capsules of 8 numbers, "
                    f"{K} types at each of {G}x{G} positions. Each vector is squashed (Eq. 1) so its length lies between 0 and 1. "
                    "In the paper, **length** is meant to be **presence** (how sure the capsule is that its part is there) and **direction** the **pose** "
                    "(8 numbers for how the part looks; the arrows show them along the two directions in which this image's vectors differ most)."
                ],
                measured=measured,
                warn=warn,
                terms=("primary_length", "pose"),
            )
        elif k == "predictions":
            primary = tour.primary_len.reshape(-1)[tour.shown]  # (SHOWN,) |u_i|: primary_len is (G, G, K) of the I capsules
            article = "an" if str(names[W])[:1].lower() in tuple("aeiou") else "a"
            step = replace(
                step,
                figure="grid",
                data={  # one row per class capsule, one column per primary capsule followed: narrow enough for a phone
                    "values": tour.pred_len.T,
                    "rows": names,
                    "columns": [f"P{n + 1}" for n in range(len(tour.shown))],
                    "title": f"Length of the predictions u_hat_j|i for each {words.capsule} j (red: {names[W]})",
                    "highlight_row": W,
                    "primary": primary,  # each followed capsule's own length |u_i|, as the caption writes it
                },
                caption=f"rows: the {words.capsules} (red: {names[W]}, the longest after routing); columns: the six primary capsules "
                f"with the longest predictions for {names[W]}, "
                + "; ".join(
                    f"P{n + 1} = {where} (|u_i| = {two(x)})" for n, (where, x) in enumerate(zip(tour.shown_names, primary, strict=True))
                ),
                text=[
                    f"Each primary capsule multiplies its vector by a learned matrix {label('W')} once per {words.capsule}: "
                    f"{I} x {J} predictions {label('u_hat')} (Eq. 2), each a {D}-number guess of what {words.thing} j's capsule should be: "
                    f"'if I am this {'piece of stroke' if words.digits else 'part'}, {article} {pn[W]} would sit here and look like this'. "
                    f"A prediction's length is not a confidence: it is the primary capsule's own length {label('primary_length')} "
                    f"stretched or shrunk by W_ij, which differs for every {words.thing}. Each prediction is a vote; how much it "
                    f"weighs in the sum s_j is its coupling {label('c')}, which routing now sets: predictions that agree with "
                    "each other should win."
                ],
                measured=prediction_words(f"P1 ({tour.shown_names[0]})", tour.pred_len[0], pn, W, words.thing, float(primary[0])),
                terms=("u_hat", "W", "primary_length"),
            )
        elif k.startswith("iteration"):
            t = int(k.removeprefix("iteration")) - 1
            first = (
                f"Procedure 1 of the paper, iteration 1: every {label('b')} starts at 0, so every {label('c')} is 1/{J} = {two(1 / J)}: "
                "each capsule splits its prediction equally."
                if t == 0
                else f"Iteration {t + 1}: each {label('b')} has grown by the {label('agreement')} of the iteration before, and c = softmax(b) (Eq. 3) follows."
            )
            sums = (
                f"Each {words.capsule} sums the weighted predictions, {label('s')} (Eq. 2), and squashes it to {label('v')} (Eq. 1): "
                + squash_words(f"s_{pn[W]}", f"v_{pn[W]}", tour.s_len[t, W], tour.v_len[t, W], capsnet_length)
                + "; "
                + squash_words(f"s_{pn[R]}", f"v_{pn[R]}", tour.s_len[t, R], tour.v_len[t, R], capsnet_length)
                + f". The figure draws s and v in a plane of the {D} dimensions; the lengths under it are the full ones."
            )
            rows = {"primary capsule": tour.shown_names}
            for j in (W, R):
                rows[f"b to {pn[j]}"] = tour.b[t][tour.shown, j]
                rows[f"c to {pn[j]}"] = tour.c[t][tour.shown, j]
            summary = coupling_numbers(tour.c[t], tour.entropy[t], tour.pred_all_len[:, W], W)
            step = replace(
                step,
                figure="routing",
                data={
                    "t": t,
                    "s_len": tour.s_len[t, [W, R]],
                    "v_len": tour.v_len[t, [W, R]],
                    "c": tour.c[t],
                    "shown": tour.shown,
                    "winner": W,
                    "uniform": 1 / J,
                    "entropy": tour.entropy[t],
                    "weights": tour.pred_all_len[:, W],
                    **summary,
                },
                caption=f"each {words.capsule}'s plane: x along its final output v, so a prediction's x is its agreement with v (up to |v|)",
                text=([] if own else [not_own_words(trained_with)]) + [first, sums],
                measured=coupling_words(t, summary, tour.c[t][tour.shown, W], I, J, pn[W], "iteration 2" if t > 1 else ""),
                table=rows,
                terms=("b", "c"),
            )
        elif k == "lengths":
            layer = "DigitCaps" if words.digits else "Class capsule"
            margin = f"Training used the {label('margin_loss')}: the right capsule longer than 0.9, every other shorter than 0.1 (Eq. 4). "
            if tour.own:
                step = _lengths_step(
                    step,
                    tour.lengths,
                    names,
                    W,
                    R,
                    truth,
                    words.capsule,
                    f"{layer} lengths |v_j| after routing",
                    [
                        margin
                        + "Several capsules can be long at once: that is how the network reads two overlapping digits (the MultiMNIST page)."
                    ],
                )
            else:  # the model's own answer, with the couplings it was trained with: the lengths its loss saw
                OW = tour.own_winner
                step = _lengths_step(
                    step,
                    tour.own_lengths,
                    names,
                    OW,
                    tour.own_runner_up,
                    truth,
                    words.capsule,
                    f"{layer} lengths |v_j| with its own {trained_with.split(' (')[0]}",
                    [
                        own_answer_words(trained_with, pn[W], two(tour.lengths[W]), OW == W),
                        margin + "These are the lengths it was trained on, so the targets below apply to them.",
                    ],
                )
                step.data["dynamic"] = tour.lengths  # dynamic routing's lengths, which the text quotes beside
        elif k == "reconstruction":
            step = _reconstruction_step(
                step,
                tour.image,
                tour.reconstruction,
                names[tour.own_winner],
                tour.v.shape[-1],
                "CapsNet",
                [
                    f"The {label('reconstruction')} decoder (three fully connected layers, Fig. 2) redraws the {words.shown} from the {D} numbers "
                    f"of capsule {pn[tour.own_winner]} alone{'' if tour.own else ' (its own answer, with its own couplings)'}, the others masked to 0. During training this keeps the capsule's direction meaningful: "
                    f"its {D} numbers must say how the {words.shown} looks. The **DigitCaps explorer** lets you nudge each of the {D} numbers and watch "
                    + ("stroke width, slant and shape change (Fig. 4)." if words.digits else "the drawing change.")
                ],
            )
        elif k == "lab":
            step = lab_step(step, lab_rows, "dynamic", model_name, tour.iterations, J, "iteration 2" if tour.iterations > 1 else "")
        out.append(step)
    return out


def efficient_walk(
    tour: EfficientTour, names: list[str], words: ClassWords, model_name: str, truth: str, looks: str, lab_rows: list, mse_weight: float
) -> list[Step]:
    """Every step of an Efficient-CapsNet's tour, its figure's data and its sentences."""
    pn = [plain(n) for n in names]
    W, R = tour.winner, tour.runner_up
    I, J = tour.c.shape
    D, K = tour.v.shape[-1], tour.u.shape[-1]
    caps = [f"capsule {i + 1}" for i in range(I)]
    uniform = 1 / J
    out = []
    for step in efficient_steps(words):
        k = step.key
        if k == "input":
            step = _input_step(
                step,
                tour.image,
                truth,
                looks,
                [
                    f"This is the image the tour follows through **{plain(model_name)}**, an Efficient-CapsNet "
                    "(Mazzia, Salvetti, Chiaberge 2021). It will pass four convolutions, a layer of "
                    f"{I} primary capsules and one class capsule per class, with self-attention routing between the two capsule layers: "
                    f"one pass, no iterations. The model has {tour.parameters:,} parameters without its decoder. "
                    "A capsule outputs a vector, not a number: its length is meant to say how likely its thing is present, its direction how it looks."
                ],
            )
        elif k == "convs":
            last_c, last_side = tour.sizes[-1]
            side = tour.image.shape[-1]
            chain = " -> ".join([f"{side}x{side}"] + [f"{s}x{s}x{ch}" for ch, s in tour.sizes])
            step = replace(
                step,
                figure="maps",
                data={"maps": tour.maps, "names": [f"map {i}" for i in tour.map_ids], "scale": 8},
                caption="bright = the filter responds there (each map scaled to its own maximum)",
                text=[
                    f"Four convolutions (5x5, then three of 3x3, the last moving 2 pixels at a time), each followed by ReLU and BatchNorm: {chain}. "
                    f"Here the {len(tour.map_ids)} of the last convolution's {last_c} maps ({last_side}x{last_side}) that respond most on average, "
                    "after its ReLU and before its BatchNorm (which only rescales and shifts each map as a whole). "
                    "These are still ordinary neurons, one number per place: *whether* a feature is there, not yet *how* it sits."
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
                    "title": f"Lengths of the {I} primary capsules (presence)",
                    "axis": "length",
                    "lines": {},
                    "s_len": size,
                    "eq1": eq1,
                },
                caption=f"one bar per primary capsule; red: the longest, capsule {hi + 1}",
                text=[
                    f"{label('primary')}: a *depthwise* convolution, one {tour.grid}x{tour.grid} filter per channel, "
                    + (
                        f"as large as the whole {side}x{side} map: each of the {tour.s_primary.size} channels becomes one number, a weighted sum "
                        f"of its whole map. Those numbers are grouped into {I} capsules of {K}. There is no grid of positions: every capsule "
                        "sees the whole image."
                        if side == tour.grid
                        else f"over the {side}x{side} map. Its outputs are grouped into {I} capsules of {K}."
                    ),
                    "Efficient-CapsNet's own squash, v = (1 - 1/e^|s|) s / |s|, keeps each vector's direction and sets its length to 1 - e^-|s|: "
                    f"capsule {hi + 1}: {squash_words('s', 'v', size[hi], L[hi], efficient_length)}; "
                    f"capsule {lo + 1}: {squash_words('s', 'v', size[lo], L[lo], efficient_length)}. "
                    f"(Eq. 1 of Sabour et al. would give {two(eq1[hi])} and {two(eq1[lo])}.)",
                ],
                measured=f"Measured here: primary capsule lengths {two(L.min())} to {two(L.max())}; {int((L > SATURATED).sum())} of {I} are longer than {SATURATED}.",
                terms=("efficient_squash", "length", "pose"),
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
                    "title": f"Length of the predictions u_hat_j|i for each class capsule j (red: {names[W]})",
                    "highlight": W,
                },
                caption=f"rows: all {I} primary capsules; columns: the class capsules",
                text=[
                    f"Each primary capsule multiplies its {K} numbers by a learned {K}x{D} matrix {label('W')} once per class capsule: "
                    f"{I} x {J} predictions {label('u_hat')}, each {D} numbers for what class j's capsule should be. "
                    "A long prediction is a loud one; routing now decides how much of each prediction reaches each class capsule."
                ],
                measured=(
                    f"Measured here: the longest prediction for {pn[W]} is capsule {top + 1}'s ({two(tour.pred_len[top, W])}); "
                    f"the predictions for {pn[W]} run from {two(tour.pred_len[:, W].min())} to {two(tour.pred_len[:, W].max())}."
                ),
                terms=("u_hat", "W"),
            )
        elif k == "routing":
            s_len = np.linalg.norm(tour.s, axis=-1)
            share = float(tour.c[:, W].mean())
            near_each = [rules.near_uniform(float(tour.entropy[i]), float(tour.c[i, W]), uniform) for i in range(I)]
            decided = tour.decided()
            said = [
                "Measured here: "
                + near_uniform_words(
                    float(tour.entropy.mean()),
                    share,
                    uniform,
                    f"this image's couplings (averaged over the {I} capsules, {pn[W]} the predicted class)",
                ),
                f"By the same rule, {sum(near_each)} of the {I} capsules are near uniform on their own.",
            ]
            if len(decided):
                said.append(
                    "More than half of a vote goes to one class from "
                    + ", ".join(f"capsule {i + 1} ({two(tour.c[i].max())} to {pn[int(tour.c[i].argmax())]})" for i in decided)
                    + "."
                )
            else:
                said.append("No capsule sends more than half of its vote to one class.")
            said.append(f"The prior b runs from {tour.prior.min():.3f} to {tour.prior.max():.3f}.")
            if tour.prior.max() < 0:
                said.append(
                    f"All of it is negative (mean {tour.prior.mean():.3f}, beside a uniform share of {uniform:.3f}): "
                    "each prediction enters s_j with the weight c_ij + b_ji, so a capsule whose coupling to j is below -b_ji "
                    f"pulls s_j the opposite way. For {pn[W]}, {int((tour.c[:, W] + tour.prior[:, W] < 0).sum())} of the {I} weights are negative."
                )
            step = replace(
                step,
                figure="grid",
                data={
                    "values": tour.c,
                    "rows": caps,
                    "columns": names,
                    "title": f"Couplings c_ij after self-attention (uniform: {two(uniform)}; red: {names[W]})",
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
                caption="each row: one primary capsule's couplings, adding up to 1 over the class capsules",
                text=[
                    f"Self-attention routing, in one pass. For each class j, each prediction's {label('self_attention')} with all the predictions for j: "
                    f"a_ji = u_hat_j|i . (sum over k of u_hat_j|k) / sqrt({D}). "
                    f"Capsule i's couplings, {label('c')}, are a softmax of its a_ji over the {J} classes j, so they add up to 1. "
                    f"Then s_j = sum_i (c_ij + b_ji) u_hat_j|i, where {label('prior')} is the same for every image, and v_j = (1 - 1/e^|s_j|) s_j / |s_j|: "
                    + squash_words(f"s_{pn[W]}", f"v_{pn[W]}", s_len[W], tour.lengths[W], efficient_length)
                    + "."
                ],
                measured=" ".join(said),
                table={
                    "primary capsule": caps,
                    f"a to {pn[W]}": tour.a[:, W],
                    f"c to {pn[W]}": tour.c[:, W],
                    f"b to {pn[W]}": tour.prior[:, W],
                    f"c + b to {pn[W]}": tour.c[:, W] + tour.prior[:, W],
                    f"c to {pn[R]}": tour.c[:, R],
                },
                terms=("self_attention", "c", "prior", "u_hat"),
            )
        elif k == "lengths":
            step = _lengths_step(
                step,
                tour.lengths,
                names,
                W,
                R,
                truth,
                "class capsule",
                "Class capsule lengths |v_j| after routing",
                [
                    f"Training used the {label('margin_loss')}, as in Sabour et al.: the right capsule longer than 0.9, every other shorter than 0.1."
                ],
            )
        elif k == "reconstruction":
            step = _reconstruction_step(
                step,
                tour.image,
                tour.reconstruction,
                names[W],
                D,
                "Efficient-CapsNet",
                [
                    f"The {label('reconstruction')} decoder of Sabour et al. (three fully connected layers) redraws the {words.shown} from the {D} numbers "
                    f"of capsule {pn[W]} alone, the others masked to 0. Efficient-CapsNet trains it with {mse_weight} times the mean squared pixel "
                    "error beside the margin loss, which keeps the capsule's direction meaningful. "
                    f"The **DigitCaps explorer** lets you nudge each of the {D} numbers and watch the drawing change."
                ],
            )
        elif k == "lab":
            step = lab_step(step, lab_rows, "self-attention", model_name, stated_at="the routing step")
        out.append(step)
    return out


def matrix_walk(tour: MatrixTour, names: list[str], model_name: str, truth: str, looks: str) -> list[Step]:
    """Every step of a matrix-capsule model's tour, its figure's data and its sentences."""
    pn = [plain(n) for n in names]
    W, R = tour.winner, tour.runner_up
    out = []
    for step in matrix_steps(tour.iterations):
        k = step.key
        if k == "input":
            step = _input_step(
                step,
                tour.image,
                truth,
                looks,
                [
                    f"This is the image the tour follows through **{plain(model_name)}**, matrix capsules with EM routing (Hinton et al. 2018, Fig. 1). "
                    "Each capsule here holds a learned 4x4 matrix, which the paper intends to hold the thing's pose, and a separate "
                    "activation between 0 and 1, meant to say how present it is. Nothing in training makes the matrix a rotation "
                    "or a scale, so its 16 numbers are a learned code: which entry means what is not given."
                ],
            )
        elif k == "primary":
            H, Wd, types = tour.primary_a.shape
            H2, W2, K2 = tour.class_layer_in
            step = replace(
                step,
                figure="em_primary",
                data={"maps": tour.primary_a.transpose(2, 0, 1), "pose": tour.pose, "top": tour.primary_a.max()},
                caption=f"The pose matrix of the most active primary capsule ({tour.pose_where}, activation {two(tour.primary_a.max())})",
                text=[
                    f"A convolution, then the PrimaryCaps layer: {types} capsule types at each of {H}x{Wd} positions; "
                    "each has a 4x4 pose matrix and a logistic activation (Sec. 3). "
                    f"Two convolutional capsule layers, ConvCaps1 and {CLASS_LAYER_IN}, route by EM in small windows; "
                    f"the tour follows the last routing, from {CLASS_LAYER_IN}'s {H2 * W2 * K2} capsules ({K2} types at each of "
                    f"{H2}x{W2} positions) into the class capsules."
                ],
                measured=pose_words(tour.pose),
                terms=("pose", "a_in"),
            )
        elif k == "votes":
            step = replace(
                step,
                figure="votes",
                caption="before any routing: every vote is assigned equally to every class capsule",
                text=[
                    f"Each {CLASS_LAYER_IN} capsule (the lower capsules of this last routing) multiplies its pose by a learned 4x4 transform "
                    f"per class: a {label('vote')} for that class's pose "
                    "(16 numbers, drawn here in a plane through the class capsule's final mean pose, the same plane in every EM step). "
                    "Votes that land close together agree on one pose for the whole: that is what EM looks for."
                ],
                terms=("vote",),
            )
        elif k.startswith("iteration"):
            t = int(k.removeprefix("iteration")) - 1
            rows = {f"lower capsule ({CLASS_LAYER_IN})": tour.shown_names, "activation a": tour.a_in[tour.shown]}
            for j in (W, R):
                rows[f"R to {pn[j]}"] = tour.R[t][tour.shown, j]
            step = replace(
                step,
                figure="em",
                data={"t": t, "a": tour.a[t], "R": tour.R[t][tour.shown], "lambda": tour.lambdas[t]},
                caption="each class capsule's Gaussian: mean pose (cross), spread (ellipses); a vote's opacity is its assignment R",
                text=[
                    f"**{label('M_step')}**: each class capsule refits its {label('mu')} and {label('sigma')} to the votes weighted by {label('R')} "
                    f"and by the lower activations, and sets its {label('a_j')} (tighter = more active; {label('lambda')} = {two(tour.lambdas[t])} here). "
                    f"**{label('E_step')}**: each vote is then reassigned by how well it fits each Gaussian."
                    + (" This first M-step used equal assignments." if t == 0 else "")
                ],
                measured=(
                    f"Measured here: activation of {pn[W]} {two(tour.a[t, W])}, of {pn[R]} {two(tour.a[t, R])}; "
                    f"the six most active {CLASS_LAYER_IN} capsules send {share_words(tour.R[t][tour.shown, W])} of their vote to {pn[W]}."
                ),
                table=rows,
                terms=("a_in", "R"),
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
                    "title": "Class capsule activations after EM routing",
                    "axis": "activation",
                    "lines": {},
                    "lambda": tour.lambdas[-1],  # quoted in the text
                },
                caption="the prediction is the most active class capsule",
                text=[
                    f"The answer is the most active class capsule: **{pn[W]}** with activation {two(a[W])} (label: {plain(truth)}); "
                    f"runner-up {pn[R]} with {two(a[R])}. "
                    f"Training used the {label('spread_loss')}: the right class more active than every other by a margin. "
                    f"capsviz ramps {label('lambda')} only up to {two(tour.lambdas[-1])} here, which keeps the activations in a middle range, "
                    "so the winner is clear by rank, not by a value near 1: the **EM routing** page follows them iteration by iteration."
                ],
                terms=("spread_loss", "a_j", "lambda"),
                link=("pages/em.py", "EM routing, iteration by iteration"),
            )
        out.append(step)
    return out


@dataclass(frozen=True)
class Tour:
    """How to follow an image through one kind of routing: the walk and its steps."""

    follow: Callable[..., CapsNetTour | MatrixTour | EfficientTour]
    # the steps' keys and titles from the tour's routing iterations, the model's words and its primary grid's side
    steps: Callable[..., list[Step]]


TOURS = {  # by ModelConfig.routing
    "dynamic": Tour(capsnet_tour, capsnet_steps),
    "em": Tour(matrix_tour, lambda iterations, _words, grid=None: matrix_steps(iterations)),  # class capsules for every dataset
    "self-attention": Tour(efficient_tour, lambda _, words, grid=None: efficient_steps(words)),  # one pass: no iterations to count
}


def walk(
    tour,
    names: list[str],
    words: ClassWords,
    model_name: str,
    truth: str,
    looks: str,
    lab_rows: list,
    mse_weight: float = 0.0,
    config=None,
) -> list[Step]:
    """Every step of `tour` (what TOURS[routing].follow returned) as the page shows it. `names`: the
    class names; `truth`: the image's label; `looks`: what the input is; `lab_rows`: the routing
    lab's stored rows for this model (capsviz.analysis.lab.stored_rows); `mse_weight`:
    Efficient-CapsNet's decoder loss weight; `config`: the model's (ModelConfig), which says what a
    CapsNet was trained with."""
    if isinstance(tour, CapsNetTour):
        trained = trained_words(getattr(config, "couplings", "dynamic"), config.routing_iterations, tour.iterations) if config else None
        return capsnet_walk(tour, names, words, model_name, truth, looks, lab_rows, trained)
    if isinstance(tour, EfficientTour):
        return efficient_walk(tour, names, words, model_name, truth, looks, lab_rows, mse_weight)
    return matrix_walk(tour, names, model_name, truth, looks)
