"""Robustness analyses: affine transforms of a digit (Sabour et al. 5.2) and white-box adversarial
attacks, FGSM and BIM, untargeted and targeted (Hinton et al. 6), for any model family.

Attacks follow the input gradient of a cross-entropy loss over each model's class scores: the
CNN's logits, or a capsule model's lengths (CapsNet) or activations (matrix capsules) read as
logits. The capsule models' own training losses would mask the gradient: the margin and spread
losses are exactly flat once an image is classified with margin (measured: half the input
gradient entries of a trained capsnet-small are then exactly zero), and a zero gradient gives
FGSM no direction, which would look like robustness. Images stay in [0, 1] and within epsilon of
the original in the max norm."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from capsviz.analysis import as_input_batch, rules
from capsviz.config import DATASETS
from capsviz.data.affine import affine_matrices, affnist_like, transform
from capsviz.i18n import gap, t

BIM_STEPS = 10  # iterations of the basic iterative method; each moves 2.5 * epsilon / BIM_STEPS


def predict_scores(model, x: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
    """(B, 1, H, W) -> (B, J) class scores, in slices."""
    with torch.no_grad():
        return torch.cat([model.classify(xb).scores.float() for xb in x.split(batch_size)])


def attack_loss(model, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of labels y over the class scores, summed over the batch (per-image gradients)."""
    out = model.classify(x)
    logits = out.logits if out.logits is not None else out.scores
    return F.cross_entropy(logits.float(), y, reduction="sum")


def input_gradient(model, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """d loss / d x, without touching the model's parameters' .grad (cached models stay clean)."""
    with torch.enable_grad():
        x = x.detach().requires_grad_(True)
        (g,) = torch.autograd.grad(attack_loss(model, x, y), x)
    return g


def fgsm(model, x: torch.Tensor, y: torch.Tensor, epsilon: float, target: torch.Tensor | None = None) -> torch.Tensor:
    """One signed-gradient step of size epsilon: away from y (untargeted), or toward `target`."""
    if target is None:
        step = epsilon * input_gradient(model, x, y).sign()
    else:
        step = -epsilon * input_gradient(model, x, target).sign()
    return (x + step).clamp(0, 1).detach()


def bim(
    model, x: torch.Tensor, y: torch.Tensor, epsilon: float, target: torch.Tensor | None = None, steps: int = BIM_STEPS
) -> torch.Tensor:
    """Basic iterative method: `steps` FGSM steps of 2.5 * epsilon / steps, each projected back into
    the epsilon ball around x and into [0, 1]."""
    alpha = 2.5 * epsilon / steps
    adv = x.detach().clone()
    for _ in range(steps):
        adv = fgsm(model, adv, y, alpha, target)
        adv = torch.maximum(torch.minimum(adv, x + epsilon), x - epsilon).clamp(0, 1)
    return adv


def attack(model, x, y, epsilon: float, method: str = "fgsm", target=None) -> torch.Tensor:
    if epsilon == 0:
        return x.clone()
    if method == "fgsm":
        return fgsm(model, x, y, epsilon, target)
    if method == "bim":
        return bim(model, x, y, epsilon, target)
    raise ValueError(f"unknown attack {method!r}")


def other_class(y: torch.Tensor, num_classes: int, seed: int = 0) -> torch.Tensor:
    """A random target class different from each label (targeted attacks)."""
    g = torch.Generator().manual_seed(seed)
    return (y + torch.randint(1, num_classes, y.shape, generator=g)) % num_classes


def zero_gradient_fraction(model, x: torch.Tensor, y: torch.Tensor) -> float:
    """Fraction of input-gradient entries exactly zero: near 1 would mean gradient masking, an
    attack failing for lack of signal rather than a robust model (Hinton et al. 6)."""
    return float((input_gradient(model, x, y) == 0).float().mean())


@dataclass
class AttackCurve:
    epsilons: list[float]
    accuracy: list[float]  # % still classified correctly (untargeted)
    success: list[float]  # % classified as the target (targeted); [] when untargeted
    zero_gradients: float  # fraction, at the clean images

    def as_dict(self) -> dict:
        return {"epsilons": self.epsilons, "accuracy": self.accuracy, "success": self.success, "zero_gradients": self.zero_gradients}

    @classmethod
    def from_dict(cls, d: dict) -> AttackCurve:
        return cls(list(d["epsilons"]), list(d["accuracy"]), list(d["success"]), float(d["zero_gradients"]))


def attack_test_images(data, n: int, size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The first n test images as (n, C, size, size) floats in [0, 1] (28x28 digits centred on a
    40x40 canvas for models that read 40x40), and their labels."""
    x = as_input_batch(data.images[:n])  # (n, C, H, W)
    border = (size - x.shape[-1]) // 2
    if border > 0:
        x = F.pad(x, (border,) * 4)
    return x, data.labels[:n]


def attack_sweep(
    model,
    x: torch.Tensor,
    y: torch.Tensor,
    epsilons,
    *,
    method: str = "fgsm",
    targeted: bool = False,
    batch_size: int = 100,
    on_progress: Callable[[int, int], None] | None = None,
) -> AttackCurve:
    """Accuracy (untargeted) or targeted success rate at every epsilon, on images x (N, 1, H, W)."""
    target = other_class(y, model.config.num_classes) if targeted else None
    acc, success = [], []
    total, done = len(epsilons) * len(x), 0
    for eps in epsilons:
        hit = right = 0
        for i in range(0, len(x), batch_size):
            xb, yb = x[i : i + batch_size], y[i : i + batch_size]
            tb = None if target is None else target[i : i + batch_size]
            pred = predict_scores(model, attack(model, xb, yb, float(eps), method, tb)).argmax(1)
            right += int((pred == yb).sum())
            if tb is not None:
                hit += int((pred == tb).sum())
            done += len(xb)
            if on_progress:
                on_progress(done, total)
        acc.append(100.0 * right / len(x))
        if targeted:
            success.append(100.0 * hit / len(x))
    return AttackCurve([float(e) for e in epsilons], acc, success, zero_gradient_fraction(model, x[:batch_size], y[:batch_size]))


def warp(image: np.ndarray, rotate: float = 0.0, scale: float = 1.0, shear: float = 0.0, dx: float = 0.0, dy: float = 0.0) -> np.ndarray:
    """(H, W) or (C, H, W) image rotated by `rotate` degrees (counter-clockwise), scaled, sheared
    (x += shear * y) and moved by (dx, dy) pixels (right, down), about the centre; zeros fill the border."""
    H, W = image.shape[-2:]
    a = math.radians(rotate)
    # Forward map in normalised (x right, y down) coordinates; grid_sample needs its inverse.
    rot = torch.tensor([[math.cos(a), math.sin(a)], [-math.sin(a), math.cos(a)]])
    fwd = rot @ torch.tensor([[1.0, shear], [0.0, 1.0]]) @ torch.diag(torch.tensor([scale, scale]))
    inv = torch.linalg.inv(fwd)
    shift = torch.tensor([2 * dx / W, 2 * dy / H])
    theta = torch.cat([inv, (-inv @ shift).view(2, 1)], 1).unsqueeze(0)  # (1, 2, 3)
    planes = torch.tensor(image, dtype=torch.float32).reshape(-1, H, W)  # (C, H, W): each channel moved alike
    return transform(planes, theta.expand(len(planes), 2, 3)).reshape(image.shape).numpy()


def affine_test_set(images: torch.Tensor, size: int, strength: float, seed: int = 0) -> torch.Tensor:
    """Test images, uint8 (N, H, W) MNIST digits or (N, C, H, W) a user's, under random affine maps
    with affNIST's ranges scaled by `strength` (0: untouched, 1: affNIST's): (N, C, size, size).
    28x28 digits for a 40x40 model make the affNIST-like test set; otherwise the same maps about
    the centre of the images the model was trained on (each channel moved alike)."""
    if size == 40 and images.shape[-1] == 28:
        return affnist_like(images, seed=seed, strength=strength).unsqueeze(1)
    x = as_input_batch(images)  # (N, C, H, W)
    if strength == 0:
        return x
    N, C, H, W = x.shape
    g = torch.Generator().manual_seed(seed)
    theta = affine_matrices(N, g, strength).repeat_interleave(C, 0)  # (N*C, 2, 3)
    return transform(x.reshape(N * C, H, W), theta).view(N, C, H, W)


def affine_sweep(
    models: dict, images: torch.Tensor, labels: torch.Tensor, size: int, strengths, on_progress: Callable[[int, int], None] | None = None
) -> dict[str, list[float]]:
    """Accuracy (%) of each named model on the affine test set at every strength."""
    result = {name: [] for name in models}
    for k, s in enumerate(strengths):
        x = affine_test_set(images, size, float(s))
        for name, m in models.items():
            result[name].append(100.0 * float((predict_scores(m, x).argmax(1) == labels).float().mean()))
        if on_progress:
            on_progress(k + 1, len(strengths))
    return result


def describe_comparison(
    series: dict[str, list[float]],
    xs,
    capsule: str,
    x_name: str,
    n: int,
    higher_is_robust: bool = True,
    baseline: str | None = None,
) -> list[str]:
    """Plain sentences on what two measured curves show: the capsule model (`capsule`, a key of
    `series`) against the baseline (another key; by default the first other one), point by point,
    and who holds up better overall. Each point is a rate in % on `n` test images per model, and a
    gap counts only when it is beyond chance (capsviz.analysis.rules.beyond_chance). Says only what
    the numbers show; the page adds why they may differ from the papers."""
    others = [name for name in series if name != capsule]
    if not others or not len(xs):
        return []
    other = baseline if baseline in others else others[0]
    caps, base = np.asarray(series[capsule], float), np.asarray(series[other], float)
    gap = (caps - base) if higher_is_robust else (base - caps)  # > 0: the capsule model holds up better
    real = np.array([rules.beyond_chance(c, n, b, n) for c, b in zip(caps, base, strict=True)])
    strongest = int(np.argmax(np.abs(gap)))
    k = strongest
    v = dict(x_name=x_name, x=f"{xs[k]:g}", capsule=capsule, other=other, caps=f"{caps[k]:.1f}", base=f"{base[k]:.1f}")
    if real[k]:
        v["better"] = capsule if gap[k] > 0 else other
        if higher_is_robust:
            point = t(
                "At {x_name} {x}, where **{capsule}** and **{other}** differ most, **{capsule}** measures {caps}% accuracy and "
                "**{other}** {base}%: {better} holds up better there, beyond chance.",
                **v,
            )
        else:
            point = t(
                "At {x_name} {x}, where **{capsule}** and **{other}** differ most, **{capsule}** measures {caps}% attack "
                "success and **{other}** {base}%: {better} holds up better there, beyond chance.",
                **v,
            )
    else:
        v |= dict(gap=f"{abs(caps[k] - base[k]):.1f}", noise=f"{rules.noise(caps[k], n, base[k], n):.1f}", n=n)
        if higher_is_robust:
            point = t(
                "At {x_name} {x}, where **{capsule}** and **{other}** differ most, **{capsule}** measures {caps}% accuracy and "
                "**{other}** {base}%: a gap of {gap} points, within the {noise} points that two standard errors give on {n} "
                "test images (within chance), so neither holds up better there.",
                **v,
            )
        else:
            point = t(
                "At {x_name} {x}, where **{capsule}** and **{other}** differ most, **{capsule}** measures {caps}% attack "
                "success and **{other}** {base}%: a gap of {gap} points, within the {noise} points that two standard errors "
                "give on {n} test images (within chance), so neither holds up better there.",
                **v,
            )
    N = len(gap)

    def at(mask: np.ndarray) -> str:
        """'none of the N', or 'k of the N (x_name 1.75 and 2)': how many values, then which."""
        values = [f"{x:g}" for x, m in zip(xs, mask, strict=True) if m]
        if not values:
            return t("none of the {N}", N=N)  # a count, as the other case: the sentences put it where a count goes
        listed = values[0] if len(values) == 1 else t("{items} and {last}", items=t(", ").join(values[:-1]), last=values[-1])
        return t("{count} of the {N} ({x_name} {listed})", count=len(values), N=N, x_name=x_name, listed=listed)

    better, worse = (gap > 0) & real, (gap < 0) & real
    wins, losses = int(better.sum()), int(worse.sum())
    close = N - wins - losses
    v = dict(N=N, x_name=x_name, capsule=capsule, other=other, better=at(better), worse=at(worse), close=close, n=n)
    if wins > losses:
        verdict = t(
            "Counting the {N} {x_name} values one by one, {capsule} holds up better than {other} beyond chance at {better}, "
            "worse at {worse}, and {close} of the {N} are within chance (two standard errors on {n} test images).",
            **v,
        )
    elif losses > wins:
        verdict = t(
            "Counting the {N} {x_name} values one by one, {capsule} holds up *worse* than {other} beyond chance at {worse}, "
            "better at {better}, and {close} of the {N} are within chance (two standard errors on {n} test images). Here it "
            "is less robust than the baseline, not more.",
            **v,
        )
    else:
        verdict = t(
            "Counting the {N} {x_name} values one by one, {capsule} does not hold up clearly better or worse than {other}: "
            "better beyond chance at {better}, worse at {worse}, and {close} of the {N} are within chance (two standard "
            "errors on {n} test images).",
            **v,
        )
    return [point, verdict]


def has_baseline(meta, every) -> list:
    """The CNN model files among `every` ((path, meta) pairs) that read the same images at the same
    size as the model `meta` describes: its baselines on this page."""
    return [
        p
        for p, m in every
        if m.config.routing is None and m.config.in_size == meta.config.in_size and m.image_dataset == meta.image_dataset
    ]


def stand_in(sidebar, suitable: list, every: list) -> tuple[tuple, str]:
    """The capsule model this page shows when the sidebar's (`sidebar`, a meta) does not fit, from
    `suitable` ((path, meta) pairs that fit), and one sentence on why it was picked. Preferred, in
    order: a model with a baseline CNN (so there is a comparison), one trained on the sidebar's
    dataset, on the images that dataset is made from (MultiMNIST's: MNIST), with dynamic routing;
    then the first by name."""
    source = lambda m: DATASETS[m.dataset].source if m.dataset in DATASETS else m.dataset  # noqa: E731 - one use per model

    def key(pm):
        path, m = pm
        dynamic = m.config.routing == "dynamic" and getattr(m.config, "couplings", "dynamic") == "dynamic"
        return (not has_baseline(m, every), m.dataset != sidebar.dataset, source(m) != source(sidebar), not dynamic, path.name)

    ranked = sorted(suitable, key=key)
    path, m = ranked[0]
    best = key(ranked[0])[:-1]
    ties = sum(key(pm)[:-1] == best for pm in ranked)
    cnns = has_baseline(m, every)
    why = [
        t("a baseline CNN ({cnns}) was trained on its images, so the two can be compared", cnns=", ".join(p.stem for p in cnns))
        if cnns
        else t("no model that fits has a baseline CNN to compare with")
    ]
    if m.dataset == sidebar.dataset:
        why.append(t("it was trained on {dataset} too", dataset=m.dataset))
    elif source(m) == source(sidebar):
        why.append(t("it was trained on {dataset}, the images {source} is made from", dataset=m.dataset, source=sidebar.dataset))
    if not best[3]:
        why.append(t("it was trained with dynamic routing"))
    said = t("It was picked because {reasons}.", reasons=t("; ").join(why))
    if ties > 1:
        said += gap() + t("Of the {ties} models that fit as well, it is the first by name.", ties=ties)
    return (path, m), said
