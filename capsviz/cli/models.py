"""capsviz evaluate | list | export | import: the models in a folder, measured, shipped in
float16, and a user's own PyTorch CapsNet turned into one."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from capsviz.cli.arguments import checked, data_folder, integer, number
from capsviz.config import DATASET_NAMES, MAX_ITERATIONS, check_dataset
from capsviz.errors import CapsvizError
from capsviz.families.capsnet.config import CLASS_SQUASH_AXES
from capsviz.i18n import said, t
from capsviz.progress import duration, seconds_left
from capsviz.registry import FAMILIES, ROUTINGS


def add_evaluate(sub) -> None:
    """`evaluate` and its options."""
    datasets = ", ".join(DATASET_NAMES)
    e = sub.add_parser("evaluate", help=t("print a checkpoint's test metrics as JSON"))
    e.add_argument("path", type=Path, help=t("a checkpoint file, or a model's name in the model folder (capsviz list shows them)"))
    e.add_argument(
        "--dataset",
        type=checked(check_dataset),
        help=t("{datasets} or KIND:PATH (default: the dataset it was trained on)", datasets=datasets),
    )
    e.add_argument("--data-dir", help=t("folder holding the dataset files"))
    e.add_argument("--limit", type=integer(1), help=t("evaluate on only the first N test images"))
    e.add_argument("--device", default="auto", help=t("auto, cpu, cuda, cuda:N or mps"))
    e.add_argument(
        "--routing",
        action="store_true",
        help=t("CapsNets: also how far routing moves the couplings from uniform (first 1000 images)"),
    )


def add_list(sub) -> None:
    """`list` and its folder."""
    ls = sub.add_parser("list", help=t("list checkpoints with their metrics"))
    ls.add_argument("folder", type=Path, nargs="?", help=t("default: the app's folder (see `capsviz doctor`)"))


def add_export(sub) -> None:
    """`export` and its options."""
    x = sub.add_parser("export", help=t("store a checkpoint in float16 for shipping, re-measuring its test error"))
    x.add_argument("src", type=Path, help=t("the checkpoint to store in float16"))
    x.add_argument("dst", type=Path, help=t("the checkpoint file to write"))
    x.add_argument("--data-dir", help=t("folder holding the dataset files"))
    x.add_argument("--max-change", type=number(0, 100), default=0.02, help=t("largest test-error change (percentage points) accepted"))
    x.add_argument("--replace", action="store_true", help=t("replace a model already at dst"))
    x.add_argument("--device", default="auto", help=t("auto, cpu, cuda, cuda:N or mps"))


def add_import(sub) -> None:
    """`import` and its options."""
    im = sub.add_parser(
        "import",
        help=t("turn your own PyTorch CapsNet's saved state dict into a capsviz checkpoint (docs/own-model.md)"),
        description=t(
            "Read a state dict (torch.save(model.state_dict(), FILE), or .safetensors) of a CapsNet laid out as "
            "Conv1 -> PrimaryCaps -> DigitCaps (-> decoder), save it as a capsviz checkpoint and measure its test error."
        ),
    )
    im.add_argument("file", type=Path, help=t("the saved state dict (.pt, .pth, .safetensors); never run as code"))
    im.add_argument("--out", type=Path, required=True, help=t("the checkpoint to write, e.g. checkpoints/mine.safetensors"))
    im.add_argument("--dataset", choices=DATASET_NAMES, default="mnist", help=t("what it was trained on (default: mnist)"))
    im.add_argument("--replace", action="store_true", help=t("replace a model already at --out"))
    im.add_argument("--data-dir", help=t("folder holding the dataset files"))
    im.add_argument("--limit", type=integer(1), help=t("evaluate on only the first N test images (default: all)"))
    im.add_argument("--no-evaluate", dest="evaluate", action="store_false", help=t("store it as not evaluated"))
    im.add_argument(
        "--primary-order",
        choices=["type-major", "position-major", "view"],
        help=t(
            "how your code makes and numbers the primary capsules: (type, row, col), the PyTorch default, (row, col, type), "
            "as TensorFlow's reshape does, or view: K neighbouring values of the NCHW output, as view(B, -1, K) gives "
            "(default: type-major; searched with --against)"
        ),
    )
    im.add_argument(
        "--primary-channels",
        choices=["capsule", "dim"],
        help=t(
            "which conv channel holds dim d of capsule type t: t*K + d (capsule), or d*T + t (dim) "
            "(default: capsule for one conv, dim for K convs)"
        ),
    )
    im.add_argument(
        "--iterations",
        type=integer(1, MAX_ITERATIONS),
        help=t("routing iterations your code runs (default: 3; searched with --against)"),
    )
    im.add_argument("--softmax", choices=["classes", "inputs"], help=t("what your routing's couplings sum to 1 over (default: classes)"))
    im.add_argument(
        "--logits",
        choices=["image", "batch", "batch-sum"],
        help=t("routing logits per image, averaged over the batch, or summed over it (default: image)"),
    )
    im.add_argument(
        "--routing-batch",
        type=integer(1, 1 << 16),
        help=t(
            "the batch size your evaluation routes, when your network averages its routing logits over the batch (with "
            "--against: asked for when the check finds it does, and the check runs on one such batch; without: goes with --logits batch)"
        ),
    )
    im.add_argument(
        "--prior",
        choices=["learned", "none"],
        help=t(
            "whether your routing starts from the learned prior b the weights hold (learned) or from 0 (none) "
            "(default: learned where the weights hold one; searched with --against)"
        ),
    )
    im.add_argument(
        "--squash",
        choices=["sabour", "efficient"],
        help=t("your squash: Eq. 1 (sabour) or (1 - e^-|s|) s/|s| (default: sabour)"),
    )
    im.add_argument(
        "--primary-squash",
        choices=["capsule", "map"],
        help=t("what the primary squash normalises: each capsule, or each value's whole map"),
    )
    im.add_argument(
        "--class-squash",
        choices=CLASS_SQUASH_AXES,
        help=t(
            "what the class capsules' squash normalises: each capsule (default), each value over the classes, all at once, "
            "or each value on its own"
        ),
    )
    im.add_argument(
        "--normalise",
        nargs=2,
        type=number(-1000, 1000),
        metavar=("MEAN", "STD"),
        help=t("your images were normalised (x - MEAN) / STD before the network"),
    )
    im.add_argument(
        "--against",
        metavar="MODULE:NAME",
        help=t(
            "RUNS YOUR CODE: build your network (a class or factory, MODULE dotted or a .py file), give it the same weights, "
            "compare every stage with the import on real test images and search the options above for one that matches within 1e-4"
        ),
    )
    im.add_argument("--against-args", metavar="JSON", help=t("keyword arguments for --against's class or factory, a JSON object"))
    im.add_argument(
        "--against-input",
        metavar="MODULE:NAME",
        help=t(
            "RUNS YOUR CODE: the input pipeline your evaluation feeds the network (a transform, a test dataset or DataLoader "
            "in order, or a factory of one); --against then compares on its images (default: [0, 1] images and the usual "
            "normalisations, the one your network's lengths are most decisive on kept)"
        ),
    )
    im.add_argument("--check-images", type=integer(1, 1024), default=16, help=t("test images compared with --against (default: 16)"))


def evaluation_progress():
    """An on_progress(done, total) that tells stderr how far an evaluation is, with the time left,
    at most every 2 s (stdout keeps the result alone, for scripts)."""
    start = last = time.perf_counter()

    def show(done: int, total: int) -> None:
        nonlocal last
        now = time.perf_counter()
        if now - last >= 2 or done >= total:
            last = now
            left = seconds_left(done, total, now - start)
            said = dict(done=done, total=total, left=duration(left or 0))
            line = (
                t("evaluate: {done} / {total} images", **said)
                if left is None
                else t("evaluate: {done} / {total} images, about {left} left", **said)
            )
            print(line, file=sys.stderr, flush=True)

    return show


def cmd_evaluate(args) -> int:
    import torch

    from capsviz.checkpoint import load_checkpoint
    from capsviz.config import user_dataset
    from capsviz.data import input_shape, load_split
    from capsviz.devices import pick_device
    from capsviz.train import evaluate

    device = pick_device(args.device)
    data_folder(args.data_dir)
    args.path = model_path(args.path)
    model, meta = load_checkpoint(args.path, device)
    dataset = args.dataset or meta.image_dataset
    resize = model.config.in_size if user_dataset(dataset) else None  # a user's images are made the size the model takes
    size = input_shape(dataset, resize).size
    if model.config.in_size != size:
        raise CapsvizError(
            t(
                "{path} takes {model}x{model} inputs; {dataset} images are {size}x{size}",
                path=args.path,
                model=model.config.in_size,
                dataset=dataset,
                size=size,
            )
        )
    data = load_split(dataset, "test", args.data_dir, resize)
    metrics = evaluate(model, dataset, data, device=device, limit=args.limit, on_progress=evaluation_progress())
    if args.routing:
        from capsviz.analysis.routing import coupling_summary
        from capsviz.data import batches

        if model.config.routing != "dynamic":
            raise CapsvizError(
                t(
                    "--routing: {path} is a {family} model; the coupling summary is for dynamic routing",
                    path=args.path,
                    family=model.config.family,
                )
            )
        x = torch.cat([b[0] for b in batches(dataset, data, 250, train=False, device=device, limit=1000)])
        metrics["routing"] = coupling_summary(model, x.squeeze(1), model.config.routing_iterations)
    print(json.dumps({"checkpoint": str(args.path), "dataset": dataset, **metrics}))
    return 0


def model_path(given: Path) -> Path:
    """A checkpoint named as a file, or by its name in the model folder (`capsnet-mnist`)."""
    from capsviz.paths import model_folder

    if given.exists() or given.parent != Path("."):
        return given
    folder = model_folder()
    return next((folder / n for n in (given.name, given.name + ".safetensors") if (folder / n).is_file()), given)


def cmd_list(args) -> int:
    from capsviz.adapter import checked_words, import_notes
    from capsviz.analysis.lab import trained_with
    from capsviz.checkpoint import list_checkpoints, total_training, training_labels
    from capsviz.paths import model_folder

    args.folder = args.folder or model_folder()
    if not args.folder.is_dir():
        raise CapsvizError(t("{folder}: no such folder", folder=args.folder))
    rows = list_checkpoints(args.folder)
    if not rows:
        print(t("no checkpoints in {folder}", folder=args.folder))
    for path, meta in rows:
        if isinstance(meta, str):
            print(t("{name}: unusable: {why}", name=path.name, why=meta))
            continue
        m = meta.metrics
        epochs, hardware = training_labels(total_training(meta), unit=True)
        family, routed = FAMILIES.get(meta.family), ROUTINGS.get(trained_with(meta.config) or "")
        kind = t(family.short) if family else meta.family  # a family this capsviz does not know: as the file names it
        if family and routed and meta.config.routing != "em":  # matrix capsules: EM is in their name
            kind = t("{family} with {routing}", family=kind, routing=t(routed.words))
        said = dict(name=path.name, family=kind, dataset=meta.dataset, epochs=epochs, hardware=hardware)
        if m.measured:
            line = t(
                "{name}: {family} on {dataset}, {epochs}, {error}% test error on {n}, {hardware}",
                error=f"{m.test_error:.2f}",
                n=m.n_test,
                **said,
            )
        else:
            line = t("{name}: {family} on {dataset}, {epochs}, not evaluated, {hardware}", **said)
        imported = meta.raw.get("imported")
        print(f"{line}; {checked_words(imported.get('checked'), imported.get('warnings') or [])}" if imported else line)
        for note in import_notes(meta):  # what its import noted, indented under it
            print(f"  {note}")
    return 0


def cmd_export(args) -> int:
    """float16 weights halve the file; the error is measured again after the conversion, on the
    whole test set, and the export is refused if it moved by more than --max-change."""
    import torch

    from capsviz.checkpoint import check_room, load_checkpoint, pair_bytes, plan_write, recover, save_checkpoint, writer_lock
    from capsviz.data import batches, load_split
    from capsviz.devices import pick_device
    from capsviz.train import evaluate

    device = pick_device(args.device)
    data_folder(args.data_dir)
    plan_write(args.dst, replace=args.replace, flag="dst")  # before the minutes of evaluation; again below, under the lock
    model, meta = load_checkpoint(args.src, device)
    if meta.dataset is None:
        raise CapsvizError(
            t("{path} does not record the dataset it was trained on; export re-measures its test error there", path=args.src)
        )
    check_room(args.dst, pair_bytes(model))  # before the evaluation, which takes minutes
    data = load_split(meta.dataset, "test", args.data_dir)
    x = next(batches(meta.dataset, data, 256, train=False, device=device))[0]

    def reconstructions():
        with torch.no_grad():
            return model(x).reconstruction

    before, rec = evaluate(model, meta.dataset, data, device=device), reconstructions()
    model.half().float()  # round every weight through float16, as the file will store it
    after, rec16 = evaluate(model, meta.dataset, data, device=device), reconstructions()
    rec_change = None if rec is None else float((rec16 - rec).abs().max())
    change = after["test_error"] - before["test_error"]
    if abs(change) > args.max_change:
        raise CapsvizError(
            t(
                "float16 storage changes the test error by {change} points ({before}% -> {after}%); not exported",
                change=f"{change:+.3f}",
                before=f"{before['test_error']:.2f}",
                after=f"{after['test_error']:.2f}",
            )
        )
    meta = dict(
        meta.raw, metrics=after, float32_test_error=before["test_error"], stored_as="float16", float16_reconstruction_change=rec_change
    )
    with writer_lock(args.dst):
        recover(args.dst)  # what a killed write to dst left
        plan_write(args.dst, replace=args.replace, flag="dst")  # an export is finished and evaluated: it goes straight to dst
        save_checkpoint(args.dst, model, meta, half=True)
    print(
        json.dumps(
            {
                "checkpoint": str(args.dst),
                "float32_test_error": before["test_error"],
                "float16_test_error": after["test_error"],
                "max_reconstruction_change": rec_change,  # largest pixel change over 256 test images, None without a decoder
                "bytes": args.dst.stat().st_size,
            }
        )
    )
    return 0


def cmd_import(args) -> int:
    from capsviz.adapter import import_file
    from capsviz.paths import model_folder

    data_folder(args.data_dir)
    if args.normalise and args.normalise[1] <= 0:
        raise CapsvizError(t("--normalise: STD must be above 0, found {found}", found=f"{args.normalise[1]:g}"))
    options = {"routing_softmax": args.softmax, "routing_logits": args.logits, "squash": args.squash, "primary_squash": args.primary_squash}
    options["class_squash"] = args.class_squash
    options = {k: v for k, v in options.items() if v is not None}
    if args.prior is not None:
        options["routing_prior"] = args.prior == "learned"
    if args.routing_batch is not None:
        if args.logits not in ("batch", "batch-sum") and not args.against:
            raise CapsvizError(
                t("--routing-batch goes with --logits batch, --logits batch-sum or --against (the batch whose routing logits are shared)")
            )
        options["routing_batch"] = args.routing_batch
    if args.against:
        from capsviz.against import parse_kwargs

        kwargs = parse_kwargs(args.against_args)
        print(
            t(
                "--against runs your code: {code} is imported and called on this machine, with your permissions (only for code you trust)",
                code=args.against,
            ),
            file=sys.stderr,
            flush=True,
        )
    elif args.against_args or args.against_input:
        raise CapsvizError(t("{flag} goes with --against MODULE:NAME", flag="--against-args" if args.against_args else "--against-input"))
    if args.against_input and args.normalise:
        raise CapsvizError(t("--against-input and --normalise both say how the images are fed: give one"))
    result = import_file(
        args.file,
        args.out,
        dataset=args.dataset,
        replace=args.replace,
        data_dir=args.data_dir,
        limit=args.limit,
        primary_order=args.primary_order,
        primary_channels=args.primary_channels,
        evaluate=args.evaluate,
        on_progress=evaluation_progress(),
        iterations=args.iterations,
        computation=options,
        normalise=tuple(args.normalise) if args.normalise else None,
        against=args.against,
        against_args=kwargs if args.against else None,
        against_input=args.against_input,
        check_images=args.check_images,
    )
    result["notes"], result["warnings"] = ([said(w) for w in result[k]] for k in ("notes", "warnings"))
    for note in result["notes"]:
        print(f"  {note}", file=sys.stderr)
    print(f"{result['check']}", file=sys.stderr)
    for warning in result["warnings"]:
        print(t("warning: {message}", message=warning), file=sys.stderr)
    if args.out.resolve().parent != model_folder().resolve():
        print(t("open it in the app: {command}", command=f"capsviz app --checkpoints {args.out.resolve().parent}"), file=sys.stderr)
    print(json.dumps(result))
    return 0
