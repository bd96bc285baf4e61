"""Whether an imported twin looks like the network it was imported from, where its code was not
run: `plausibility` (lengths, primary capsules, the decoder and the test error against what a
trained CapsNet shows) and `other_routings` (whether another routing the weights allow fits the
test labels as well as the one assumed). Each finding is one warning, saying what it points to."""

from __future__ import annotations

import torch

from capsviz.errors import CapsvizError
from capsviz.i18n import N_, sentence, sentence_n


def fit_lengths(lengths: torch.Tensor, y: torch.Tensor) -> float:
    """Eq. 4's margin loss of class-capsule lengths (B, J) against labels y."""
    from capsviz.losses import margin_loss

    targets = y if y.dim() == 1 else torch.nn.functional.one_hot(y, lengths.shape[1]).sum(1).clamp(max=1)  # MultiMNIST's two ids
    return float(margin_loss(lengths, targets))


# What a trained CapsNet shows on real test images (the shipped capsnet-mnist, capsnet-small-mnist
# and capsnet-one-iteration-mnist on MNIST's first 64: median primary-capsule length 0.99, longest
# class capsule 0.91-0.94 on average, shortest 0.002-0.004, reconstruction error 0.16-0.26 of the
# image's own energy); a twin far outside these computes other numbers than its original
PRIMARY_SHORT = 0.5
SATURATED, COLLAPSED = 0.9, 0.1
RECONSTRUCTION_POOR = 0.7
ERROR_HIGH = 20.0


def plausibility(model, dataset: str, data_dir=None, metrics: dict | None = None, n: int = 64, *, checked: bool = False) -> list[str]:
    """Warnings that a twin computes other numbers than the network it was imported from, each
    saying what it points to; empty when nothing looks wrong or the test images are missing.
    `checked`: the twin's computation was checked against its code, its input pipeline was not:
    only the findings another input normalisation would explain are said."""
    x = first_images(dataset, data_dir, n)
    if x is None:
        return []
    with torch.no_grad():
        primary = model.primary_capsules(x).norm(dim=-1)  # (B, I)
        out = model(x)
    lengths = out.scores  # (B, J)
    found = []
    if float(lengths.min()) > SATURATED and not checked:
        found.append(
            sentence(
                "every class capsule is longer than {limit} on every image (saturated): the squash, the routing's softmax or "
                "its logits probably differ from your code's; check the import against your code with --against MODULE:CLASS "
                "(README: Your own model)",
                limit=SATURATED,
            )
        )
    elif float(lengths.max()) < COLLAPSED:
        if checked:
            words = N_(
                "every class capsule is shorter than {limit} on every image (collapsed): the input's normalisation probably "
                "differs from your code's; give the pipeline your evaluation feeds it with --against-input MODULE:NAME or "
                "--normalise MEAN STD"
            )
        else:
            words = N_(
                "every class capsule is shorter than {limit} on every image (collapsed): the squash's axis, the input's "
                "normalisation or the capsules' grouping probably differ from your code's; check the import against your "
                "code with --against MODULE:CLASS (README: Your own model)"
            )
        found.append(sentence(words, limit=COLLAPSED))
    median = float(primary.median())
    if median < PRIMARY_SHORT:
        if checked:
            words = N_(
                "the primary capsules are short (median length {median}; a trained CapsNet's are mostly above 0.9): the "
                "input's normalisation probably differs from your code's; give the pipeline your evaluation feeds it with "
                "--against-input MODULE:NAME or --normalise MEAN STD"
            )
        else:
            words = N_(
                "the primary capsules are short (median length {median}; a trained CapsNet's are mostly above 0.9): their "
                "grouping, the squash's axis or the input's normalisation probably differ from your code's; check the "
                "import against your code with --against MODULE:CLASS (README: Your own model)"
            )
        found.append(sentence(words, median=f"{median:.2f}"))
    if out.reconstruction is not None and not checked:
        rec, img = out.reconstruction.flatten(1), x.flatten(1)
        ratio = float(((rec - img) ** 2).sum() / (img**2).sum().clamp_min(1e-12))
        if ratio > RECONSTRUCTION_POOR:
            found.append(
                sentence(
                    "the decoder barely redraws the images (error {ratio} of their own energy; a trained CapsNet's is about "
                    "0.2): it was trained on other class capsules than this twin computes; check the import against your code "
                    "with --against MODULE:CLASS (README: Your own model)",
                    ratio=f"{ratio:.2f}",
                )
            )
    if metrics is not None and metrics["test_error"] > ERROR_HIGH:
        if checked:
            words = N_(
                "{error}% test error, far above a trained CapsNet's: the input's normalisation probably differs from your "
                "code's; give the pipeline your evaluation feeds it with --against-input MODULE:NAME or --normalise MEAN STD"
            )
        else:
            words = N_(
                "{error}% test error, far above a trained CapsNet's: the capsules' numbering (--primary-order, "
                "--primary-channels) or the computation probably differ from your code's; check the import against your "
                "code with --against MODULE:CLASS (README: Your own model)"
            )
        found.append(sentence(words, error=f"{metrics['test_error']:.1f}"))
    return found


# How many labelled test images a fit of the lengths to the labels is measured on
FIT_IMAGES = 256

# Another routing "fits as well" when its margin loss is at most this much above the assumed
# one's: a CapsNet trained to route 4 times and routed 3 fits within 3% (its lengths differ by
# about 0.01), while the count it was trained with fits best
FIT_AS_WELL = 1.05


def other_routings(model, dataset: str, data_dir=None, *, count_said: bool = False, prior_said: bool = False) -> list[str]:
    """A warning when routing the twin's predictions another way its weights allow fits the labels
    of FIT_IMAGES test images as well as the twin's own routing or better, and gives other lengths:
    the weights alone then do not say how the original routes. The ways tried: 1 to 6 iterations
    (unless `count_said`) and, where the weights hold a learned routing prior and `prior_said` is
    off, routing from it or from 0 (code may keep a logit tensor it never routes from). Empty where
    the test images are missing."""
    from dataclasses import replace

    from capsviz.against import MAX_ITERATIONS_TRIED
    from capsviz.routing import DynamicOptions, class_squash, route

    labelled = first_labelled(dataset, data_dir, FIT_IMAGES)
    if labelled is None:
        return []
    x, y = labelled
    cfg = model.config
    stated = (cfg.routing_iterations, bool(cfg.routing_prior))
    own = model.dynamic_options()
    priors = [stated[1]] if prior_said or not cfg.routing_prior else [True, False]
    squash = class_squash(cfg.squash, cfg.class_squash)
    longest = max(MAX_ITERATIONS_TRIED, stated[0])
    lengths = {}
    with torch.no_grad():
        u_hat = model.predictions(x)  # (B, J, I, D)
        for prior in priors:
            options = own if prior else replace(own or DynamicOptions(), prior=None)
            trace = route(cfg.couplings, u_hat, iterations=longest, squash=squash, record=True, dynamic=options)
            for count in [stated[0]] if count_said else range(1, longest + 1):
                lengths[count, prior] = trace.v_trace[count - 1].norm(dim=-1)  # (B, J)
    fits = {k: fit_lengths(v, y) for k, v in lengths.items()}
    if len(fits) == 1:
        return []
    best = min((k for k in fits if k != stated), key=fits.get)
    change = float((lengths[best] - lengths[stated]).abs().max())
    if fits[best] > fits[stated] * FIT_AS_WELL or change <= 1e-4:
        return []
    agree = 100 * float((lengths[best].argmax(1) == lengths[stated].argmax(1)).float().mean())
    measured = {
        "loss": f"{fits[best]:.3f}",
        "own": f"{fits[stated]:.3f}",
        "images": len(y),
        "change": f"{change:.3f}",
        "agree": f"{agree:.1f}",
    }
    if best[1] == stated[1]:
        return [
            sentence_n(
                "routing {n} time fits these weights as well as {stated} (margin loss {loss} against {own} on {images} test "
                "images; lengths differ by up to {change}, the same answer on {agree}% of them): the weights do not say how "
                "many times your code routes; say it with --iterations, or check with --against MODULE:CLASS",
                "routing {n} times fits these weights as well as {stated} (margin loss {loss} against {own} on {images} test "
                "images; lengths differ by up to {change}, the same answer on {agree}% of them): the weights do not say how "
                "many times your code routes; say it with --iterations, or check with --against MODULE:CLASS",
                best[0],
                stated=stated[0],
                **measured,
            )
        ]
    prior = model.routing_prior.detach()
    return [
        sentence_n(
            "routing {n} time from 0, not from the learned prior b {shape} the weights hold, fits them as well as "
            "routing {stated} times from it (margin loss {loss} against {own} on {images} test images; lengths differ by up to "
            "{change}, the same answer on {agree}% of them; b's values reach {size}): the weights do not say whether your "
            "code starts its routing from b; say it with --prior none or --prior learned, or check with --against MODULE:CLASS",
            "routing {n} times from 0, not from the learned prior b {shape} the weights hold, fits them as well as "
            "routing {stated} times from it (margin loss {loss} against {own} on {images} test images; lengths differ by up to "
            "{change}, the same answer on {agree}% of them; b's values reach {size}): the weights do not say whether your "
            "code starts its routing from b; say it with --prior none or --prior learned, or check with --against MODULE:CLASS",
            best[0],
            stated=stated[0],
            shape=tuple(prior.shape),
            size=f"{float(prior.abs().max()):.2g}",
            **measured,
        )
    ]


def first_images(dataset: str, data_dir, n: int) -> torch.Tensor | None:
    """The first n test images of `dataset` as the model reads them (B, C, S, S) in [0, 1], or None where missing."""
    got = first_labelled(dataset, data_dir, n)
    return None if got is None else got[0]


def first_labelled(dataset: str, data_dir, n: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The first n test images (B, C, S, S) in [0, 1] and their labels, or None where missing."""
    from capsviz.data import batches, load_split

    try:
        data = load_split(dataset, "test", data_dir)
    except CapsvizError:
        return None
    x, y, _ = next(iter(batches(dataset, data, n, train=False, limit=n)))
    return x.float(), y
