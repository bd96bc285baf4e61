"""Your own capsule network in capsviz: `capsviz import` reads the weights of a PyTorch CapsNet
written elsewhere (capsviz.capsule_weights: `CapsuleAdapter` finds its parts in any layout public
code writes and makes it a capsviz `CapsNet`, its twin), checks the twin against the user's own
code where given (capsviz.against), warns where it was not (capsviz.plausible), measures it and
stores it as a capsviz checkpoint that says whether it was checked, and how.
"""

from __future__ import annotations

from pathlib import Path

import torch

from capsviz.capsule_weights import (  # noqa: F401 - the public names of importing a model, kept here
    COMPUTATION,
    PRIMARY_CHANNELS,
    PRIMARY_ORDERS,
    CapsuleAdapter,
    Parts,
    _check_values,
    read_state_dict,
)
from capsviz.errors import CapsvizError, first_line
from capsviz.i18n import N_, Sentence, recalled, said, sentence, stored, t, tn
from capsviz.plausible import FIT_IMAGES, first_images, first_labelled, fit_lengths, other_routings, plausibility


def import_file(
    src: Path,
    out: Path,
    *,
    dataset: str = "mnist",
    replace: bool = False,
    data_dir=None,
    limit: int | None = None,
    primary_order: str | None = None,
    primary_channels: str | None = None,
    evaluate: bool = True,
    on_progress=None,
    adapter: type[CapsuleAdapter] = CapsuleAdapter,
    iterations: int | None = None,
    computation: dict | None = None,
    against: str | None = None,
    against_args: dict | None = None,
    against_input: str | None = None,
    normalise: tuple[float, float] | None = None,
    check_images: int = 16,
) -> dict:
    """`capsviz import`: the network saved at `src` as a capsviz checkpoint at `out`, under the
    rule every writer follows (`checkpoint.plan_write`: never a shipped model, never over another
    one without `replace`). Its test error on `dataset`'s test images (the first `limit`) is
    measured and stored; where the images are missing, or `evaluate` is off, it is stored as not
    evaluated. `adapter`: a subclass of CapsuleAdapter for another layout. `iterations`: routing
    iterations (3 when None and not searched); `computation`: CapsuleAdapter's, how the network
    differs from the paper; `normalise`: (mean, std) the network's images were normalised with.
    `primary_order`, `primary_channels`: CapsuleAdapter's (None: "type-major" and the default
    channels without `against`, searched with it).

    `against` ("MODULE:NAME", called with `against_args`) RUNS THE USER'S CODE: their network is
    built, given the same weights, and compared stage by stage with the twin on `check_images`
    test images (capsviz.against); the options not given are searched, and the twin is stored,
    marked checked, only if every stage seen matches within 1e-4 on the images the user's own
    evaluation feeds it: what `against_input` (the user's transform, dataset or DataLoader,
    "MODULE:NAME") makes of them, or the images normalised by `normalise`, or else the one of the
    normalisations in common use its lengths fit the labels on far better than on any other
    (`input_scale`). Anything else is a CapsvizError in one line: the first stage that differs, or
    an input scale that neither the user nor the network's lengths say. The checkpoint says which
    images the check fed, and where the scale was inferred the warnings of `plausibility` a wrong
    one would explain stay on. Without `against` the twin is stored marked "not checked against
    its code", with all of them, and `other_routings`' where the iterations or the prior's use
    were not said. Returns what the command prints: the checkpoint, its metrics, the check, the
    warnings and the notes."""
    from capsviz import checkpoint as ckpt
    from capsviz.config import DATASETS

    if dataset not in DATASETS:
        raise CapsvizError(t("unknown dataset {name}; choose from {names}", name=repr(dataset), names=", ".join(DATASETS)))
    out = Path(out)
    if out.suffix != ".safetensors":
        raise CapsvizError(
            t(
                "--out {path}: a capsviz checkpoint is a .safetensors file; name it e.g. {name}",
                path=out,
                name=out.with_suffix(".safetensors").name,
            )
        )
    ckpt.plan_write(out, replace=replace)  # refused now, before the reading and the evaluation
    state = read_state_dict(src)
    _check_values(state)
    in_size, classes = DATASETS[dataset].in_size, len(_class_names(dataset))
    computation = dict(computation or {})
    if normalise is not None:
        computation["input_mean"], computation["input_std"] = (float(v) for v in normalise)
    checked = None
    if against is None:
        reader = adapter(
            state,
            in_size=in_size,
            num_classes=classes,
            primary_order=primary_order or "type-major",
            primary_channels=primary_channels,
            routing_iterations=iterations or 3,
            computation=computation,
        )
    else:
        given = {k: v for k, v in computation.items() if k not in ("input_mean", "input_std")}
        given |= {
            k: v for k, v in (("primary_order", primary_order), ("primary_channels", primary_channels), ("iterations", iterations)) if v
        }
        if normalise is not None:
            given["normalise"] = tuple(float(v) for v in normalise)
        reader, checked = _checked_against(
            state, against, against_args, dataset, data_dir, check_images, adapter, in_size, classes, given, against_input
        )
    model = reader.model()
    notes = list(reader.notes)
    metrics = _evaluate(model, dataset, data_dir, limit, on_progress) if evaluate else None
    if metrics is None:
        notes.append(
            sentence("not evaluated: --no-evaluate")
            if not evaluate
            else sentence("not evaluated: the {name} test images were not found", name=dataset)
        )
    # a check covers the network's computation; its input pipeline only where the user gave it
    told = checked is not None and checked["fed"]["by"] != "lengths"
    warnings_ = [] if told else plausibility(model, dataset, data_dir, metrics, checked=checked is not None)
    prior_said = "routing_prior" in computation
    if against is None and (iterations is None or (reader.get_parts().prior is not None and not prior_said)):
        # the routing was assumed: say when another way the weights allow fits them as well
        warnings_ += other_routings(model, dataset, data_dir, count_said=iterations is not None, prior_said=prior_said)
    meta = {
        "dataset": dataset,
        "complete": True,
        "hardware": t("trained outside capsviz (imported from {file})", file=Path(src).name)[:500],
        "imported": {
            "file": Path(src).name[:255],
            "sha256": _file_digest(src),
            "notes": [stored(n) for n in notes],  # said in each reader's language where shown (import_notes)
            "warnings": [stored(w) for w in warnings_],
            "checked": checked,
        },
    }
    if metrics is not None:
        meta["metrics"] = metrics
    with ckpt.writer_lock(out):
        ckpt.recover(out)
        ckpt.plan_write(out, replace=replace)  # finished and evaluated: it goes straight to `out`
        ckpt.save_checkpoint(out, model, meta)
    check_words = checked_words(checked, warnings_)
    return {"checkpoint": str(out), **(metrics or {"evaluated": False}), "check": check_words, "warnings": warnings_, "notes": notes}


def _checked_against(state, spec, spec_args, dataset, data_dir, n, adapter, in_size, classes, given, pipeline=None):
    """The adapter whose twin matches the user's own network on n test images fed as the user's
    evaluation feeds them, and what the checkpoint records of the check (`fed`: the images, and
    whether the user's `pipeline` MODULE:NAME, their --normalise or the network's lengths said
    them); a CapsvizError naming the first stage that differs, or the input scale where nothing
    says it (`input_scale`)."""
    from capsviz import against

    net = against.load_network(spec, spec_args)
    try:
        net.load_state_dict(state, strict=True)
    except Exception as e:  # noqa: BLE001 - the user's class does not take the file's tensors
        raise CapsvizError(
            t("--against {spec}: your network does not take this file's weights ({why})", spec=spec, why=first_line(e))
        ) from None
    net = net.float().eval()
    stated_batch = given.pop("routing_batch", None)

    def make(st, **kw):
        return adapter(st, in_size=in_size, num_classes=classes, **kw)

    def reader_for(s: dict) -> CapsuleAdapter:
        keep = {k: s[k] for k in COMPUTATION if k in s}
        return make(
            state,
            primary_order=s["primary_order"],
            primary_channels=s["primary_channels"],
            routing_iterations=s["iterations"],
            computation=keep,
        )

    def compare(count: int, options: dict):
        x = first_images(dataset, data_dir, count)
        if x is None:
            raise CapsvizError(
                t("--against compares on real test images, and the {name} test images were not found (capsviz data)", name=dataset)
            )
        feed, batch = None, None
        if pipeline:
            feed, batch = against.input_images(pipeline, x)
            options = {**options, "normalise": against.normalisation_of(feed, x, pipeline)}
        result = against.check(state, net, x, make_adapter=make, given=options, feed=feed)
        if not result.ok:
            raise CapsvizError(t("not imported: {why}", why=result.message))
        return result, x, batch, options.get("normalise", (0.0, 1.0))

    result, x, loader_batch, fed = compare(n, given)
    s = result.setting
    if pipeline:
        by = {"by": "pipeline", "pipeline": pipeline[:500]}
    elif "normalise" in given:
        by = {"by": "normalise"}
    else:  # nothing says the input scale: the network's lengths must, or nothing is imported
        fixed = {**given, **{k: s[k] for k in against.SEARCHED}}  # the network's own computation, as found on [0, 1]

        def on(norm):
            other = result if norm == fed else against.check(state, net, x, make_adapter=make, given={**fixed, "normalise": norm})
            return other if other.ok else None

        fed, result, detail = input_scale(dataset, data_dir, on, reader_for)
        s, by = result.setting, {"by": "lengths"}
        given = {**fixed, "normalise": fed}
    if s["routing_logits"] != "image":
        batch = stated_batch or loader_batch
        if batch is None:
            words = N_(
                "not imported: your network averages its routing logits over the batch (found on {n} images), so its answers "
                "depend on the batch size your evaluation uses: say it with --routing-batch N, or give your DataLoader with "
                "--against-input MODULE:NAME"
            )
            if s["routing_logits"] == "batch-sum":
                words = N_(
                    "not imported: your network sums its routing logits over the batch (found on {n} images), so its answers "
                    "depend on the batch size your evaluation uses: say it with --routing-batch N, or give your DataLoader with "
                    "--against-input MODULE:NAME"
                )
            raise CapsvizError(t(words, n=result.images))
        if batch != result.images:  # checked again on one whole batch of the user's size
            fixed = {**given, **{k: s[k] for k in against.SEARCHED}}
            result, x, _, _ = compare(batch, {**fixed, "routing_batch": batch})
            s = result.setting
    reader = reader_for(s)
    checked = {
        "against": spec[:500],
        "max_difference": result.max_difference,
        "images": result.images,
        "stages": list(result.seen),
        "fed": {"mean": fed[0], "std": fed[1], **by},
    }
    reader.get_parts().notes.append(result.message)
    reader.get_parts().notes.append(sentence("the check fed your network {images}", images=fed_words(checked["fed"])))
    if by["by"] == "lengths":
        reader.get_parts().notes.append(detail)
    return reader, checked


# How a network's lengths fit the test labels: Eq. 4's margin loss, what it was trained to lower,
# and its error. On FIT_IMAGES images, one input normalisation is taken as the scale the network
# was trained on only where its error there beats guessing and is lower than on every other, each
# beyond chance, and its margin loss is DECISIVE times lower than on every other. A network trained
# 30 steps on synthetic digits fits 3-10 times better on its own scale, with at least 16 points less
# error; an untrained one can fit [0, 1] 2.5 times better only because its capsules saturate on the
# other scales, with the same error on both (78.5% and 79.5%); 4 to 8 steps fit less than twice better.
DECISIVE = 2.0


def input_scale(dataset: str, data_dir, check_on, reader_for) -> tuple[tuple[float, float], object, str]:
    """The input normalisation a network was trained on, where neither its pipeline nor
    --normalise says it: of capsviz.against.NORMALISATIONS, those under which `check_on(norm)` (a
    capsviz.against.Check, or None where the twin does not match there) matches, the one where the
    twin's lengths (`reader_for(setting)`) fit the test labels decisively better than on any other
    (DECISIVE). Returns it, its check and the note saying why; a CapsvizError in one line where no
    scale stands out, saying what to pass."""
    from capsviz.against import NORMALISATIONS
    from capsviz.analysis.rules import beats_chance, beyond_chance

    x, y = first_labelled(dataset, data_dir, FIT_IMAGES)
    tried = {}  # normalisation -> (check, margin loss, test error %)
    for norm in NORMALISATIONS:
        found = check_on(norm)
        if found is not None:
            tried[norm] = (found, *_fit(reader_for(found.setting), x, y))
    best = min(tried, key=lambda k: tried[k][1])
    _, loss, error = tried[best]
    others = [v for k, v in tried.items() if k != best]
    labels = 1 if y.dim() == 1 else y.shape[1]
    n = len(y)
    decided = beats_chance(error, n, len(_class_names(dataset)), labels) and all(
        loss * DECISIVE <= other_loss and error < other_error and beyond_chance(error, n, other_error, n)
        for _, other_loss, other_error in others
    )
    fits = _one_after_another(
        [
            sentence("{images}: margin loss {loss}, {error}% test error", images=pixels_words(*k), loss=f"{v[1]:.3f}", error=f"{v[2]:.1f}")
            for k, v in tried.items()
        ]
    )
    if not decided:
        raise CapsvizError(
            t(
                "not imported: your input pipeline was not given, and your network's lengths do not say which images it was "
                "trained on (on {n} test images, {fits}), so no check of it would be one of your evaluation: give what your "
                "evaluation feeds it with --against-input MODULE:NAME (your test transform, dataset or DataLoader) or "
                "--normalise MEAN STD (--normalise 0 1 for [0, 1] pixels)",
                n=n,
                fits=fits,
            )
        )
    note = sentence(
        "your input pipeline not given: {images}, inferred from its lengths, which fit the labels far best there (on {n} "
        "test images, {fits}); --against-input or --normalise says it",
        images=pixels_words(*best),
        n=n,
        fits=fits,
    )
    return best, tried[best][0], note


def _fit(reader: CapsuleAdapter, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """The twin's margin loss on the labelled images x, y (low where its lengths pick the labels
    decisively) and its test error there in % (an image of two labels, MultiMNIST's, is right when
    its two longest class capsules are its two)."""
    with torch.no_grad():
        lengths = reader.model()(x).scores  # (B, J)
    if y.dim() == 1:
        right = lengths.argmax(1) == y
    else:
        top = lengths.topk(y.shape[1], dim=1).indices.sort(1).values
        right = (top == y.sort(1).values).all(1)
    return fit_lengths(lengths, y), 100.0 * (1 - float(right.float().mean()))


def _one_after_another(items: list[Sentence]) -> Sentence:
    """Sentences said one after another, each pair "{first}; {then}" in the reader's language."""
    said_ = items[-1]
    for item in reversed(items[:-1]):
        said_ = sentence("{first}; {then}", first=item, then=said_)
    return said_


def pixels_words(mean: float, std: float) -> Sentence:
    """Images as a network is fed them: [0, 1] pixels, or (x - mean) / std of them."""
    if (mean, std) == (0.0, 1.0):
        return sentence("[0, 1] pixels")
    return sentence("pixels (x - {mean}) / {std}", mean=f"{mean:.4g}", std=f"{std:.4g}")


def fed_words(fed: dict) -> Sentence:
    """What a check fed the user's network, from the checkpoint's `checked.fed`, and who said it
    (a `Sentence`: said in the language of whoever reads it)."""
    images = pixels_words(fed["mean"], fed["std"])
    if fed["by"] == "pipeline":
        return sentence("your input pipeline {pipeline}, {images}", pipeline=fed.get("pipeline", ""), images=images)
    if fed["by"] == "normalise":
        return sentence("{images} (--normalise)", images=images)
    return sentence("{images}, inferred from its lengths", images=images)


def checked_words(checked: dict | None, warnings: list[str] = ()) -> str:
    """The zoo's and `capsviz list`'s mark for an imported model, from what its checkpoint records
    (`imported.checked`, `imported.warnings`): whether its twin was checked against its code, on
    which images, and how many warnings the import gave (each is in the import's output and the
    checkpoint, said in the reader's language: capsviz.i18n.stored)."""
    if checked:
        values = {"difference": f"{checked['max_difference']:.2g}", "n": checked["images"]}
        if checked.get("fed"):
            mark = t(
                "checked against its code: max difference {difference} on {n} images fed {images}",
                images=fed_words(checked["fed"]),
                **values,
            )
        elif checked.get("input"):  # imports of an earlier capsviz kept these words as they said them
            mark = t("checked against its code: max difference {difference} on {n} images fed {images}", images=checked["input"], **values)
        else:
            mark = t("checked against its code: max difference {difference} on {n} images", **values)
    else:
        mark = t("not checked against its code")
    if not warnings:
        return mark
    return tn("{mark}; the import gave {n} warning", "{mark}; the import gave {n} warnings", len(warnings), mark=mark)


def how_it_computes(meta) -> list[str]:
    """What the pages say of a model written elsewhere, in plain words: whether it was checked
    against its own code, and each way it computes differently from the paper
    (capsviz.families.capsnet.model.computation_words). Empty for capsviz's own models."""
    from capsviz.families.capsnet.model import computation_words

    raw = meta.raw if hasattr(meta, "raw") else meta
    imported = raw.get("imported") if isinstance(raw, dict) else None
    lines = [] if imported is None else [checked_words(imported.get("checked"), imported.get("warnings") or [])]
    return lines + computation_words(meta.config)


def import_notes(meta) -> list[str]:
    """What the import of a model written elsewhere noted (what it assumed, found, ignored, and
    what its check compared and fed), in the reader's language: the checkpoint keeps each as a
    message and its values (capsviz.i18n.stored); an older import's plain text as it is. Empty
    for capsviz's own models."""
    raw = meta.raw if hasattr(meta, "raw") else meta
    imported = raw.get("imported") if isinstance(raw, dict) else None
    return [said(recalled(note)) for note in (imported or {}).get("notes") or []]


def _class_names(dataset: str):
    from capsviz.data import class_names

    return class_names(dataset)


def _evaluate(model, dataset: str, data_dir, limit, on_progress) -> dict | None:
    from capsviz.data import load_split
    from capsviz.train import evaluate

    try:
        data = load_split(dataset, "test", data_dir)
    except CapsvizError:
        return None
    n = model.config.routing_batch if model.config.routing_logits != "image" else 0
    batch = n * max(1, 256 // n) if n else 256  # batch-averaged logits: whole groups of the stated size, as the original's loop
    return evaluate(model, dataset, data, batch_size=batch, limit=limit, on_progress=on_progress)


def _file_digest(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
