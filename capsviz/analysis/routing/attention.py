"""The sentences of the routing page's one-pass view (self-attention, Efficient-CapsNet): its
couplings beside the learned prior, and the same capsules with dynamic routing."""

from __future__ import annotations

import numpy as np

from capsviz.analysis.routing.traces import AttentionTrace
from capsviz.analysis.rule_words import uniform_words
from capsviz.i18n import gap, t


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
            "Each column is one of the {I} primary capsules. The primary capsules give **{name}** on average {share} of their "
            "vote (uniform: {uniform}); their couplings are {verdict}. The prior spans {lo} to {hi}: its largest size, {prior}, is as large as the largest "
            "coupling, {c}, so what the model learned about which capsule feeds which class counts as much as the routing of "
            "this image.",
            **v,
        )
    return t(
        "Each column is one of the {I} primary capsules. The primary capsules give **{name}** on average {share} of their "
        "vote (uniform: {uniform}); their couplings are {verdict}. The prior spans {lo} to {hi}: its largest size, {prior}, is below the largest coupling, "
        "{c}, so the routing of this image weighs more in the sums.",
        **v,
    )


def sweep_words(predictions: list[int], winner: int, name: str) -> str:
    """Self-attention's prediction against dynamic routing's with 1..T iterations."""
    changed = [k + 1 for k, p in enumerate(predictions) if p != winner]
    T = len(predictions)
    said = t("These weights were trained for self-attention routing; dynamic routing here uses them as they are (and Eq. 1's squash).")
    if changed:
        said += gap() + t(
            "With dynamic routing the prediction differs from self-attention's at {changed} of {T} iteration counts.",
            changed=len(changed),
            T=T,
        )
    else:
        said += gap() + t("With any number of dynamic-routing iterations the prediction stays {name}.", name=name)
    return said + gap() + t("The **Routing lab** compares the routings over the whole test set.")
