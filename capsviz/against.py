"""Is the imported twin the user's network? `capsviz import FILE --against MODULE:NAME` builds the
user's own network from their own code, loads the same weights into it and into the capsviz twin,
runs both on the same real test images, and compares them stage by stage:

    conv1           Conv1's output after its ReLU                    (B, C1, S', S')
    primary         the squashed primary capsules                    (B, I, K)
    u_hat           the predictions                                  (B, J, I, D)
    couplings       the couplings c of the last routing iteration    (B, I, J)
    class_capsules  the class capsules v                             (B, J, D)
    reconstruction  the decoder's picture, masked by the longest v   (B, H*W)

It searches the ways a CapsNet is commonly written (how the primary capsules are grouped and
numbered, a normalisation inside its forward, the squash's axis and form, the routing's softmax
axis, its logits per image or per batch, the number of iterations) for a setting under which
every stage it can see matches within TOLERANCE, stage by stage: where the user's code shows a
stage, a setting survives it only if it matches there, so the search stays small.

What the network is fed is the user's pipeline's: `input_images` runs their own transform,
test dataset or DataLoader on the same test images and `normalisation_of` finds the one
(x - mean) / std it applies, which the twin then applies itself; the caller (capsviz.adapter)
tries the usual normalisations where the user gives no pipeline.

How the user's stages are read (forgiving: any of these, whatever the names):
1. a method `capsviz_stages(x)` on the network, returning a dict with any of STAGES as keys;
2. the outputs of every submodule (forward hooks), the forward's own output (a tensor, or a tuple,
   list or dict of them), and tensors the forward leaves as attributes of its modules (many
   public CapsNets keep `self.c_ij` for plotting).
Each is matched to a stage by its shape (sizes of 1 dropped, axes in any order) and its values:
the closest tensor of a fitting shape is the stage. A stage none fits, or whose fitting tensors
all differ (primary capsules before their squash), is named as not found; the class capsules must
be found, and they and the reconstruction must match.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import itertools
import json
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
import torch.nn.functional as F

from capsviz.errors import CapsvizError, first_line
from capsviz.families.capsnet.config import CLASS_SQUASH_AXES
from capsviz.i18n import N_, sentence, t, tn

TOLERANCE = 1e-4
STAGES = ("conv1", "primary", "u_hat", "couplings", "class_capsules", "reconstruction")
STAGE_WORDS = {  # each translated where it is said: t(STAGE_WORDS[stage])
    "conv1": N_("Conv1"),
    "primary": N_("the primary capsules"),
    "u_hat": N_("the predictions u_hat"),
    "couplings": N_("the couplings"),
    "class_capsules": N_("the class capsules"),
    "reconstruction": N_("the reconstruction"),
}
# What capsviz's twin computes at each stage, said where that stage differs from the user's code
STAGE_HINTS = {
    "conv1": N_(
        "capsviz's Conv1 is a stride-1 conv without padding, then ReLU; if your data pipeline normalises the images, "
        "give it with --against-input MODULE:NAME or say how with --normalise MEAN STD"
    ),
    "primary": N_(
        "capsviz's PrimaryCaps is one stride-2 conv without padding (or K of them) grouped into capsules as "
        "--primary-order says, then squashed"
    ),
    "u_hat": N_("capsviz's predictions are u_hat = W u, one W per pair of primary capsule and class, no bias"),
    "couplings": N_(
        "capsviz routes by agreement (softmax over classes or inputs, logits per image or per batch, a prior if "
        "the weights hold one, the class capsules squashed over each capsule, the classes, all at once or each value alone)"
    ),
    "class_capsules": N_(
        "capsviz's class capsules are squash(sum_i c_ij u_hat_j|i), squashed over each capsule, the classes, "
        "all at once or each value alone"
    ),
    "reconstruction": N_("capsviz's decoder is three Linear layers (ReLU, ReLU, sigmoid) fed the class capsules masked to the longest"),
}
# Normalisations in common use, searched inside the network's forward and, when the user gives no
# input pipeline, tried as the pipeline's: [0, 1] as capsviz reads images, MNIST's usual mean/std,
# and (x - 0.5) / 0.5
NORMALISATIONS = ((0.0, 1.0), (0.1307, 0.3081), (0.5, 0.5))
# The options the search finds (check's `given` may fix each): the network's own computation
SEARCHED = (
    "primary_order",
    "primary_channels",
    "squash",
    "primary_squash",
    "class_squash",
    "routing_softmax",
    "routing_logits",
    "routing_prior",
    "iterations",
    "internal",
)
MAX_ITERATIONS_TRIED = 6
MAX_SETTINGS = 4000  # settings carried from one stage to the next


@dataclass
class Check:
    """What the comparison found. ok: every stage seen matched within TOLERANCE under `setting`
    (the adapter's keyword arguments); max_difference over the stages seen; seen: the stages
    compared, with where each was found in the user's code; message: one plain line."""

    ok: bool
    message: str
    images: int
    setting: dict = field(default_factory=dict)
    max_difference: float = float("inf")
    seen: dict = field(default_factory=dict)


def _named(spec: str, flag: str):
    """NAME of `MODULE:NAME` (MODULE dotted, importable from the current folder, or a path to a
    .py file, which imports its neighbours). Runs the user's code."""
    module_name, sep, name = spec.rpartition(":")
    if not sep or not module_name or not name:
        raise CapsvizError(t("{flag} {spec}: give MODULE:NAME, e.g. mynet:CapsNet or mynet.py:make_model", flag=flag, spec=repr(spec)))
    try:
        if module_name.endswith(".py"):
            path = Path(module_name)
            if not path.is_file():
                raise CapsvizError(t("{flag}: no such file {path}", flag=flag, path=module_name))
            # as `python FILE.py` runs it: its own folder first, so code split over several files
            # imports its other modules; the current folder too, as with the dotted form
            for folder in (Path.cwd(), path.resolve().parent):
                if str(folder) not in sys.path:
                    sys.path.insert(0, str(folder))
            loaded = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(loaded)
            sys.modules.setdefault(path.stem, module)
            loaded.loader.exec_module(module)
        else:
            if "" not in sys.path and str(Path.cwd()) not in sys.path:
                sys.path.insert(0, str(Path.cwd()))
            module = importlib.import_module(module_name)
        return getattr(module, name)
    except CapsvizError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's code failed: said in one line, with its own words
        raise CapsvizError(failed(flag, spec, e)) from None


def failed(flag: str, spec: str, e: Exception) -> str:
    """The user's code raised e: said in one line, with its own words."""
    return t("{flag} {spec}: your code failed ({error}: {why})", flag=flag, spec=spec, error=type(e).__name__, why=first_line(e))


def load_network(spec: str, kwargs: dict | None = None) -> torch.nn.Module:
    """`MODULE:NAME` (see `_named`), NAME a class or a factory, called with `kwargs`. Runs the user's code."""
    make = _named(spec, "--against")
    try:
        net = make(**(kwargs or {}))
    except Exception as e:  # noqa: BLE001 - the user's code failed: said in one line, with its own words
        raise CapsvizError(failed("--against", spec, e)) from None
    if not isinstance(net, torch.nn.Module):
        raise CapsvizError(t("--against {spec}: gave a {kind}, not a torch.nn.Module", spec=spec, kind=type(net).__name__))
    return net


def input_images(spec: str, x: torch.Tensor) -> tuple[torch.Tensor, int | None]:
    """What the user's own input pipeline `MODULE:NAME` makes of capsviz's test images x (B, C, S,
    S) in [0, 1], laid out as x, and the batch size it evaluates with when it says one. NAME is a
    transform (called on each image, as a dataset calls it: a PIL image where the transform takes
    one, else a (C, S, S) tensor), a dataset or DataLoader of the test set in order, or a factory
    of any of these called without arguments. Runs the user's code."""
    flag = "--against-input"
    got = _named(spec, flag)
    B = x.shape[0]
    try:
        if not (_is_dataset(got) or _is_loader(got)) and callable(got) and _required_arguments(got) == 0:
            got = got()  # a factory
        if _is_loader(got):
            parts, size = [], 0
            for batch in got:
                parts.append(_image_part(batch))
                size += parts[-1].shape[0]
                if size >= B:
                    break
            feed, batch_size = torch.cat(parts)[:B], getattr(got, "batch_size", None)
        elif _is_dataset(got):
            if len(got) < B:
                raise CapsvizError(
                    t("{flag} {spec}: its dataset holds {n} images; the check compares {B}", flag=flag, spec=spec, n=len(got), B=B)
                )
            feed, batch_size = torch.stack([torch.as_tensor(_image_part(got[k])) for k in range(B)]), None
        elif callable(got):
            feed, batch_size = torch.stack([_transformed(got, image) for image in x]), None
        else:
            raise CapsvizError(
                t(
                    "{flag} {spec}: gave a {kind}; give a transform, a dataset, a DataLoader or a factory of one",
                    flag=flag,
                    spec=spec,
                    kind=type(got).__name__,
                )
            )
    except CapsvizError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's pipeline failed: said in one line, with its own words
        raise CapsvizError(
            t("{flag} {spec}: your pipeline failed ({error}: {why})", flag=flag, spec=spec, error=type(e).__name__, why=first_line(e))
        ) from None
    if feed.numel() != x.numel():
        raise CapsvizError(
            t(
                "{flag} {spec}: gives images of {shape}; the {B} test images compared are {ours} (a pipeline that resizes or "
                "pads the images cannot be compared with capsviz's)",
                flag=flag,
                spec=spec,
                shape=tuple(feed.shape[1:]),
                B=B,
                ours=tuple(x.shape[1:]),
            )
        )
    return feed.float().reshape(x.shape), batch_size


def normalisation_of(feed: torch.Tensor, x: torch.Tensor, spec: str) -> tuple[float, float]:
    """(mean, std) with feed = (x - mean) / std, fitted over every pixel; a CapsvizError where no
    such pair gives the user's images within TOLERANCE (another image set, shuffled, augmented)."""
    xf, ff = x.double().flatten(), feed.double().flatten()
    spread = ((xf - xf.mean()) ** 2).sum()
    scale = float(((xf - xf.mean()) * (ff - ff.mean())).sum() / spread) if spread > 0 else 0.0
    if scale <= 0:
        raise CapsvizError(
            t("--against-input {spec}: its images do not grow with capsviz's test images' pixels (another image set?)", spec=spec)
        )
    shift = float(ff.mean() - scale * xf.mean())
    residual = float((scale * xf + shift - ff).abs().max())
    if residual > TOLERANCE:
        raise CapsvizError(
            t(
                "--against-input {spec}: its first {n} images are not capsviz's first test images under one (x - mean) / std "
                "(max difference {difference}); give the test set's pipeline, in order, without augmentation",
                spec=spec,
                n=x.shape[0],
                difference=f"{residual:.3g}",
            )
        )
    return -shift / scale, 1 / scale


def _is_loader(obj) -> bool:
    return hasattr(obj, "batch_size") and hasattr(obj, "dataset") and hasattr(obj, "__iter__")


def _is_dataset(obj) -> bool:
    return hasattr(obj, "__getitem__") and hasattr(obj, "__len__") and not isinstance(obj, torch.Tensor | str | dict)


def _required_arguments(f) -> int:
    try:
        params = inspect.signature(f).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: taken for a transform
        return 1
    return sum(1 for p in params if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def _image_part(item) -> torch.Tensor:
    """The image of a dataset item or a loader batch: (image, label) pairs, or the image alone."""
    return item[0] if isinstance(item, tuple | list) else item


def _transformed(transform, image: torch.Tensor) -> torch.Tensor:
    """transform applied to one test image (C, S, S) in [0, 1] as a torchvision-style dataset
    applies it: to a PIL image (greyscale 'L', as MNIST's datasets give), or where it refuses
    one, to the tensor itself."""
    from PIL import Image

    pixels = (image * 255).round().to(torch.uint8)  # (C, S, S)
    pil = Image.fromarray(pixels[0].numpy()) if image.shape[0] == 1 else Image.fromarray(pixels.permute(1, 2, 0).numpy())
    try:
        out = transform(pil)
    except Exception:  # noqa: BLE001 - a transform of tensors: given the tensor instead
        out = transform(image)
    return torch.as_tensor(out)


def parse_kwargs(text: str | None) -> dict:
    """--against-args: a JSON object of keyword arguments."""
    if not text:
        return {}
    try:
        kw = json.loads(text)
    except json.JSONDecodeError as e:
        raise CapsvizError(
            t("--against-args must be a JSON object, e.g. {example} ({why})", example="""'{"classes": 10}'""", why=e.msg)
        ) from None
    if not isinstance(kw, dict):
        raise CapsvizError(t("--against-args must be a JSON object of keyword arguments"))
    return kw


def user_stages(net: torch.nn.Module, x: torch.Tensor) -> list[tuple[str, str | None, torch.Tensor]]:
    """Every tensor the user's network shows while it runs on x: (where, stage or None, tensor)."""
    found: list[tuple[str, str | None, torch.Tensor]] = []

    def hook(name):
        def keep(module, args, out):
            for where, x in _tensors(out, t("module {name}", name=name)):
                found.append((where, None, x))

        return keep

    handles = [m.register_forward_hook(hook(n)) for n, m in net.named_modules() if n]
    try:
        with torch.no_grad():
            out = net(x)
            if callable(getattr(net, "capsviz_stages", None)):
                given = net.capsviz_stages(x)
                if not isinstance(given, dict):
                    raise CapsvizError(
                        t("capsviz_stages gave a {kind}; it must return a dict of tensors by stage", kind=type(given).__name__)
                    )
                found += [
                    (f"capsviz_stages()['{k}']", k, x.detach()) for k, x in given.items() if k in STAGES and isinstance(x, torch.Tensor)
                ]
    except CapsvizError:
        raise
    except Exception as e:  # noqa: BLE001 - the user's forward failed on capsviz's images
        raise CapsvizError(
            t(
                "your network failed on {shape} test images ({error}: {why})",
                shape=tuple(x.shape),
                error=type(e).__name__,
                why=first_line(e),
            )
        ) from None
    finally:
        for h in handles:
            h.remove()
    found += [(w, None, x) for w, x in _tensors(out, t("forward output"))]
    params = {id(x) for x in itertools.chain(net.parameters(), net.buffers())}
    for name, m in net.named_modules():
        for attr, x in vars(m).items():
            if isinstance(x, torch.Tensor) and id(x) not in params and not attr.startswith("_"):
                found.append((t("attribute {name}", name=f"{name + '.' if name else ''}{attr}"), None, x.detach()))
    return found


def _tensors(out, where: str):
    if isinstance(out, torch.Tensor):
        yield where, out.detach()
    elif isinstance(out, tuple | list):
        for k, o in enumerate(out):
            yield from _tensors(o, f"{where}[{k}]")
    elif isinstance(out, dict):
        for k, o in out.items():
            yield from _tensors(o, f"{where}['{k}']")


class Twin:
    """The twin's stages under one setting after another, each computed once per setting of the
    options it depends on, capsules numbered as the original numbers them (`order`)."""

    def __init__(self, model, order: torch.Tensor, x: torch.Tensor):
        self.model, self.x, self.inv = model, x, torch.argsort(order)  # original capsule n is the twin's inv[n]
        self.memo: dict = {}

    def _once(self, key, make):
        if key not in self.memo:
            with torch.no_grad():
                self.memo[key] = make()
        return self.memo[key]

    def stage(self, name: str) -> torch.Tensor | None:
        """One stage under the model's current config (None: the twin has no such stage)."""
        m, cfg, inv = self.model, self.model.config, self.inv
        norm = (cfg.input_mean, cfg.input_std)
        grouping = (*norm, cfg.squash, cfg.primary_squash)
        routing = (*grouping, cfg.class_squash, cfg.routing_softmax, cfg.routing_logits, cfg.routing_batch, cfg.routing_prior)
        h = self._once(("conv1", norm), lambda: m.features(self.x))  # (B, S', S', C1)
        if name == "conv1":
            return h.permute(0, 3, 1, 2)
        y = self._once(("conv", norm), lambda: m.primary.conv(h.permute(0, 3, 1, 2)))  # (B, T*K, G, G)
        u = self._once(("primary", grouping), lambda: m.group_primary(y))  # (B, I, K), the twin's numbering
        if name == "primary":
            return u[:, inv]
        u_hat = self._once(("u_hat", grouping), lambda: m.digits(u))  # (B, J, I, D)
        if name == "u_hat":
            return u_hat[:, :, inv]
        # routing with t iterations is the first t of a longer run: one run serves every count tried
        longest = max(MAX_ITERATIONS_TRIED, cfg.routing_iterations)
        trace = self._once(("routing", routing, longest), lambda: m.route(u_hat, iterations=longest, record=True))
        last = cfg.routing_iterations - 1
        if name == "couplings":
            return trace.c[last][:, inv]  # (B, I, J)
        if name == "class_capsules":
            return trace.v_trace[last]  # (B, J, D)
        if m.decoder is None:
            return None
        v = trace.v_trace[last]
        return self._once(("reconstruction", routing, last), lambda: m._outputs(v, None, True).reconstruction.flatten(1))  # (B, H*W)


def _aligned(user: torch.Tensor, twin: torch.Tensor, picture: bool = False) -> list[torch.Tensor]:
    """The user's tensor laid out as the twin's, every way its shape allows: sizes of 1 dropped,
    axes permuted; one batch's values for every image (couplings shared by a batch); with
    `picture`, each image's values in another shape of its size too (a picture (B, 1, 28, 28) for
    (B, 784))."""
    u = user.float()
    u = u.reshape([s for s in u.shape if s != 1])
    want = tuple(s for s in twin.shape if s != 1)
    ways = []
    if u.numel() == twin.numel():
        if u.dim() == len(want) and u.dim() <= 5:
            ways += [u.permute(p) for p in itertools.permutations(range(u.dim())) if tuple(u.shape[k] for k in p) == want]
        if picture and not ways and u.shape[0] == want[0]:
            ways.append(u.reshape(want))
    elif twin.numel() and u.numel() * twin.shape[0] == twin.numel():  # shared by the batch: compare with every image's
        ways += [w.expand(twin.shape[0], *w.shape) for w in _aligned(u, twin[0])]
    return [w.reshape(twin.shape) for w in ways]


def _candidates(user_tensors, stage: str, twin: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    """The user's tensors that could be `stage`, each laid out as the twin's (`_aligned`): where, tensor."""
    explicit = [(w, s, x) for w, s, x in user_tensors if s == stage]
    found = []
    for w, _, x in explicit or [(w, s, x) for w, s, x in user_tensors if s is None]:
        for c in [x, F.relu(x)] if stage == "conv1" else [x]:  # Conv1's module gives it before the ReLU
            found += [(w, a) for a in _aligned(c, twin, picture=stage == "reconstruction")]
    return found


def _difference(candidates: list[tuple[str, torch.Tensor]], twin: torch.Tensor) -> tuple[float, str | None]:
    """The closest candidate to the twin's stage: (max |difference|, where it was); (inf, None) for none."""
    best, where = float("inf"), None
    for w, a in candidates:
        d = float((a - twin.float()).abs().max()) if a.numel() else 0.0
        if d < best:
            best, where = d, w
    return best, where


def _settings_for(stage: str, given: dict) -> list[dict]:
    """The options that first act at `stage`, each combination once; `given` fixes any of them."""
    if stage == "conv1":  # the pipeline's normalisation, then the forward's own: one (x - mean) / std for the twin
        m, s = given.get("normalise", (0.0, 1.0))
        inner = [given["internal"]] if "internal" in given else NORMALISATIONS
        return [{"input_mean": m + qm * s, "input_std": s * qs, "internal": (qm, qs)} for qm, qs in inner]
    if stage == "primary":
        if "primary_order" in given:
            orders = [(given["primary_order"], given.get("primary_channels"))]
        else:
            # both channel layouts for every file: one conv, K convs of T channels or T of K, can each be either
            orders = [(o, c) for o in ("type-major", "position-major") for c in ("capsule", "dim")] + [("view", None)]
        squashes = [given["squash"]] if "squash" in given else ["sabour", "efficient"]
        axes = [given["primary_squash"]] if "primary_squash" in given else ["capsule", "map"]
        return [
            {"primary_order": o, "primary_channels": c, "squash": q, "primary_squash": a}
            for (o, c), q, a in itertools.product(orders, squashes, axes)
        ]
    if stage == "couplings":
        softmax = [given["routing_softmax"]] if "routing_softmax" in given else ["classes", "inputs"]
        logits = [given["routing_logits"]] if "routing_logits" in given else ["image", "batch", "batch-sum"]
        its = [given["iterations"]] if "iterations" in given else range(1, MAX_ITERATIONS_TRIED + 1)
        axes = [given["class_squash"]] if "class_squash" in given else CLASS_SQUASH_AXES
        priors = [given["routing_prior"]] if "routing_prior" in given else [True, False]  # a prior the weights hold: used or not
        return [
            {"routing_softmax": s, "routing_logits": lg, "iterations": t, "class_squash": q, "routing_prior": b}
            for s, lg, t, q, b in itertools.product(softmax, logits, its, axes, priors)
        ]
    return [{}]


def check(
    state: dict, net: torch.nn.Module, x: torch.Tensor, *, make_adapter, given: dict | None = None, feed: torch.Tensor | None = None
) -> Check:
    """Compare the twin with the user's network `net` (holding the same weights) on images x
    (B, C, S, S) in [0, 1], searching the options not `given` (adapter keywords, plus "normalise":
    (mean, std) the user's pipeline applies before the network, "internal": (mean, std) the
    network's forward applies itself, and "iterations"). `feed`: the images the user's own
    pipeline made of x (default: x normalised as "normalise" says); the twin, fed x, normalises
    as pipeline and forward together do. `make_adapter(state, primary_order=, primary_channels=)`
    builds a CapsuleAdapter; the other options are set on its twin's config while searching.
    Returns the best setting found, or the first stage that differs."""
    given = dict(given or {})
    B = x.shape[0]
    try:  # whether the weights hold a learned routing prior (then routing from it and from 0 are both tried)
        holds_prior = make_adapter(state).get_parts().prior is not None
    except CapsvizError:
        holds_prior = False
    if not holds_prior:
        given["routing_prior"] = False
    mean, std = given.get("normalise", (0.0, 1.0))
    theirs = user_stages(net, (x - mean) / std if feed is None else feed)
    twins: dict = {}  # (primary_order, primary_channels) -> its Twin (or why none), each built once

    def twin_for(setting: dict):
        key = (setting.get("primary_order", "type-major"), setting.get("primary_channels"))
        if key not in twins:
            try:
                a = make_adapter(state, primary_order=key[0], primary_channels=key[1])
                twins[key] = Twin(a.model(), a.capsule_order(), x)
            except CapsvizError as e:
                twins[key] = e
        got = twins[key]
        if isinstance(got, CapsvizError):
            return None
        model = got.model
        keys = ("input_mean", "input_std", "squash", "primary_squash", "class_squash", "routing_softmax", "routing_logits")
        computation = {k: setting[k] for k in keys}
        batch = given.get("routing_batch", B) if setting["routing_logits"] != "image" else 0
        prior = bool(setting["routing_prior"]) and holds_prior
        model.config = replace(
            model.config, routing_iterations=setting["iterations"], routing_batch=batch, routing_prior=prior, **computation
        )
        return got

    defaults = {
        "primary_order": "type-major",
        "primary_channels": None,
        "squash": "sabour",
        "primary_squash": "capsule",
        "class_squash": "capsule",
        "routing_softmax": "classes",
        "routing_logits": "image",
        "routing_prior": holds_prior,
        "iterations": 3,
        "input_mean": mean,
        "input_std": std,
        "internal": (0.0, 1.0),
    }
    # A stage the user's code does not show, or shows only in tensors of its shape that differ
    # (primary capsules before their squash, couplings of another iteration), prunes nothing: the
    # settings go on to the next stage. The class capsules and the reconstruction must match.
    carried, seen, unmatched, present, candidates = [({}, {})], {}, {}, [], {}
    for stage in STAGES:
        expanded = [(dict(s, **extra), diffs) for s, diffs in carried for extra in _settings_for(stage, given)][:MAX_SETTINGS]
        scored = []  # (difference, where in the user's code, setting, differences so far)
        for s, diffs in expanded:
            built = twin_for({**defaults, **s})
            if built is None:
                continue
            mine = built.stage(stage)
            if mine is not None:
                if stage not in candidates:  # the twin's stage has one shape under every setting
                    candidates[stage] = _candidates(theirs, stage, mine)
                scored.append((*_difference(candidates[stage], mine), s, diffs))
        if not scored:
            if stage == "primary":
                raise next((e for e in twins.values() if isinstance(e, CapsvizError)), CapsvizError(t("no twin of these weights")))
            continue  # a twin without this stage (no decoder)
        present.append(stage)
        final = stage in ("class_capsules", "reconstruction")
        if all(where is None for _, where, _, _ in scored):  # the user's code does not show this stage
            if stage == "class_capsules":
                return Check(
                    False,
                    t(
                        "your network's class capsules were not found among its outputs (a tensor (B, J, D)); return them from "
                        "forward, or give it a method capsviz_stages(x) (README: Your own model)"
                    ),
                    B,
                )
            carried = [(s, diffs) for _, _, s, diffs in scored]
            continue
        matched = [(d, w, s, diffs) for d, w, s, diffs in scored if d <= TOLERANCE]
        if not matched:
            d, where, s, _ = min(scored, key=lambda r: r[0])
            unmatched[stage] = (d, where, len(scored), {**defaults, **s})
            if not final:
                carried = [(s, diffs) for _, _, s, diffs in scored]
                continue
            first = next(iter(unmatched))  # the first stage that differs, perhaps before this one
            d, where, tried, closest = unmatched[first]
            if first == "reconstruction" and _unmasked(twin_for(closest), candidates[first]):
                v = twin_for(closest).stage("class_capsules")
                name = next((k for k, x in state.items() if x.dim() == 2 and x.shape[1] == v[0].numel()), t("its first Linear layer"))
                return Check(
                    False,
                    t(
                        "your decoder ({name}, {where}) is fed all {J} x {D} class-capsule values unmasked; capsviz's decoder "
                        "reads them with all but the longest capsule masked to 0, so this decoder cannot be imported as it "
                        "computes (everything before it matched)",
                        name=name,
                        where=where,
                        J=v.shape[1],
                        D=v.shape[2],
                    ),
                    B,
                    setting=closest,
                    seen=seen,
                )
            values = {
                "stage": t(STAGE_WORDS[first]),
                "where": where,
                "difference": f"{d:.3g}",
                "setting": _setting_words(closest),
                "hint": t(STAGE_HINTS[first]),
            }
            if seen:
                values["matched"] = ", ".join(t(STAGE_WORDS[k]) for k in seen)
                words = tn(
                    "{stage} differ from your code's ({where}): max difference {difference} under the closest of {n} setting "
                    "tried ({setting}) (matched before it: {matched}); {hint}",
                    "{stage} differ from your code's ({where}): max difference {difference} under the closest of {n} settings "
                    "tried ({setting}) (matched before it: {matched}); {hint}",
                    tried,
                    **values,
                )
            else:
                words = tn(
                    "{stage} differ from your code's ({where}): max difference {difference} under the closest of {n} setting "
                    "tried ({setting}); {hint}",
                    "{stage} differ from your code's ({where}): max difference {difference} under the closest of {n} settings "
                    "tried ({setting}); {hint}",
                    tried,
                    **values,
                )
            return Check(
                False,
                words,
                B,
                setting=closest,
                seen=seen,
            )
        seen[stage] = min(matched, key=lambda r: r[0])[1]
        carried = [(s, {**diffs, stage: d}) for d, _, s, diffs in matched]
    best, diffs = min(carried, key=lambda r: max(r[1].values(), default=0.0))
    diff = max(diffs.values(), default=0.0)
    setting = {**defaults, **best}
    setting["routing_batch"] = given.get("routing_batch", B) if setting["routing_logits"] != "image" else 0
    # kept in the checkpoint as message and values (capsviz.i18n.stored): said in each reader's language
    values = {"difference": f"{diff:.2g}", "B": B, "matched": [sentence(STAGE_WORDS[k]) for k in seen]}
    missing = [k for k in present if k not in seen]
    if missing:
        words = sentence(
            "checked against your code: max difference {difference} on {B} images ({matched}; not found in your code's tensors: {missing})",
            missing=[sentence(STAGE_WORDS[k]) for k in missing],
            **values,
        )
    else:
        words = sentence("checked against your code: max difference {difference} on {B} images ({matched})", **values)
    return Check(True, words, B, setting, diff, seen)


def _unmasked(twin: Twin, candidates: list[tuple[str, torch.Tensor]]) -> bool:
    """Whether the user's reconstruction is the twin's decoder fed every class capsule, none masked."""
    v = twin.stage("class_capsules")  # (B, J, D)
    with torch.no_grad():
        rec = twin.model.decoder(v, torch.ones(v.shape[:2])).flatten(1)  # (B, H*W)
    return _difference(candidates, rec)[0] <= TOLERANCE


def _setting_words(s: dict) -> str:
    """A setting of the search in a few words, one per option (the options' values as the flags write them)."""
    order = s["primary_order"] + (f"/{s['primary_channels']}" if s.get("primary_channels") else "")
    words = (
        []
        if (s["input_mean"], s["input_std"]) == (0.0, 1.0)
        else [t("inputs (x - {mean}) / {std}", mean=f"{s['input_mean']:g}", std=f"{s['input_std']:g}")]
    )
    words += [
        t("primary capsules {order}", order=order),
        t("squash {squash} over each {axis}", squash=s["squash"], axis=s["primary_squash"]),
        t("class-capsule squash over {axis}", axis=s["class_squash"]),
        t("softmax over {axis}", axis=s["routing_softmax"]),
        t("logits per {what}", what=s["routing_logits"]),
        tn("{n} iteration", "{n} iterations", s["iterations"]),
    ]
    if s.get("routing_prior") is not None:
        words.append(t("from the learned prior") if s["routing_prior"] else t("from 0"))
    return ", ".join(words)
