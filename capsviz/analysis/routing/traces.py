"""One image routed, every iteration recorded: the numbers the routing pages draw (numpy out).

`dynamic_trace` (an iterative vector-capsule routing, iteration by iteration), `attention_trace`
(one pass of self-attention) and `em_trace` (a matrix-capsule model's EM routing), each with the
figure data read from it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch

from capsviz.analysis import as_batch, coupling_entropy
from capsviz.entries import Layout
from capsviz.registry import FAMILIES


@dataclass
class DynamicTrace:
    """One image through an iterative vector-capsule routing (dynamic routing) with every iteration recorded.

    c: (T, I, J) coupling coefficients of the I primary capsules to the J classes.
    lengths: (T, J) |v_j| after each iteration; b_change: (T,) mean |delta b| (Appendix A);
    c_change: (T - 1,) mean |c_{t+1} - c_t|, how much the couplings still move.
    agreement: (I, J) u_hat_j|i . v_j after the last iteration.
    softmax: what each set of couplings sums to 1 over, the model's own (capsviz.config.ROUTING_SOFTMAX):
        "classes", each input capsule splits its vote over the J classes (the paper); "inputs", each
        class capsule's couplings sum to 1 over the I input capsules.
    entropy: (T, I) of each input capsule's couplings over the classes, or with softmax "inputs"
        (T, J) of each class capsule's couplings over the inputs.
    layout: where the primary capsules sit (capsviz.entries.Layout, the family's `layout` hook):
        the grid the maps draw, and how much of capsule i lies at each of its positions; a layout
        without a grid has no maps, only the capsules in the model's order.
    agreements: (T, I, J) the agreement after each iteration (`agreement` is the last), from which
        `first` gives the trace of fewer iterations; v: (T, J, D) the class capsules after each.
    """

    c: np.ndarray
    lengths: np.ndarray
    b_change: np.ndarray
    c_change: np.ndarray
    agreement: np.ndarray
    entropy: np.ndarray
    layout: Layout
    softmax: str
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
        G = self.layout.grid
        return (self.layout.place @ self.c[t]).T.reshape(-1, G, G)

    def by_capsule(self, values: np.ndarray) -> np.ndarray:
        """(rows, grid * grid) one number per primary capsule (I,) laid out for a heatmap: for the
        paper's grouping a row per capsule type and a column per position; for another grouping the
        capsules in the model's own order, grid * grid to a row (they have no one position)."""
        G2 = self.layout.grid**2
        if self.layout.grouping == "paper":
            return values.reshape(G2, self.layout.types).T
        return values.reshape(-1, G2)

    def agreement_map(self, j: int) -> np.ndarray:
        """(grid, grid): the agreement with class j summed over the primary capsules at each position
        (over the capsule types, for the paper's grouping; each capsule counted by the share of its
        values there, for another)."""
        G = self.layout.grid
        return (self.layout.types * self.layout.place @ self.agreement[:, j]).reshape(G, G)


def entropy_of(c: np.ndarray, softmax: str) -> np.ndarray:
    """The couplings' entropy along the axis they sum to 1 over: c (..., I, J) -> (..., I) over the
    classes, or (..., J) over the inputs with softmax "inputs"."""
    return coupling_entropy(np.swapaxes(c, -1, -2) if softmax == "inputs" else c)


@torch.no_grad()
def dynamic_trace(model, image: np.ndarray, iterations: int, routing: str = "dynamic") -> DynamicTrace:
    """One image routed with `routing` (an iterative one, capsviz.entries.Routing.view
    "iterations") for `iterations` iterations, each recorded; its primary capsules placed by the
    model's family (capsviz.entries.Family.layout)."""
    u_hat = model.predictions(as_batch(image))  # (1, J, I, D)
    r = model.route(u_hat, routing=routing, iterations=iterations, record=True)  # with the model's own routing options
    c = r.c[:, 0].numpy()  # (T, I, J)
    agreements = torch.einsum("jid,tjd->tij", u_hat[0], r.v_trace[:, 0]).numpy()  # (T, I, J): u_hat_j|i . v_j after each iteration
    cfg = model.config
    softmax = getattr(cfg, "routing_softmax", "classes")
    c_change = np.abs(np.diff(c, axis=0)).mean((1, 2))  # (T-1,)
    lengths = r.v_trace[:, 0].norm(dim=-1).numpy()
    return DynamicTrace(
        c,
        lengths,
        r.b_change[:, 0].numpy(),
        c_change,
        agreements[-1],
        entropy_of(c, softmax),
        FAMILIES[cfg.family].primary_layout(cfg),
        softmax,
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
