"""capsviz train: a run's flags (one per TrainRun field), its progress line, and what an
interrupted or stopped run says and keeps."""

from __future__ import annotations

import argparse
import dataclasses
import json
import signal
import sys
import time
import typing
from pathlib import Path

from capsviz.cli.arguments import checked, data_folder, integer, number
from capsviz.config import DATASET_NAMES, USER_KINDS, TrainRun
from capsviz.errors import CapsvizError
from capsviz.i18n import t


def add_train(sub) -> None:
    """`train` and its options."""
    tr = sub.add_parser("train", help=t("train a model and save a checkpoint every epoch"))
    add_run_flags(tr)
    tr.add_argument("--resume", type=Path, help=t("continue the run saved at this checkpoint (default: a new run)"))
    tr.add_argument(
        "--out",
        type=Path,
        required=True,
        help=t(
            "the checkpoint file to write, every epoch and on stop; a model already there is kept until the run has finished "
            "(the run saves to NAME.new.safetensors meanwhile), and is replaced only with --replace or a --resume of its own run"
        ),
    )
    tr.add_argument("--replace", action="store_true", help=t("replace the model at --out once this run has finished and been evaluated"))


def add_run_flags(p: argparse.ArgumentParser) -> None:
    """One flag per TrainRun field (capsviz.config), named after it, with its help, its default
    and its bounds or choices. Optional fields default to None: what that means is said in the help."""
    hints = typing.get_type_hints(TrainRun)
    kinds = ", ".join(k + ":PATH" for k in USER_KINDS)
    for f in dataclasses.fields(TrainRun):
        m, kind = f.metadata, next(k for k in (bool, int, float, str) if k in (hints[f.name], *typing.get_args(hints[f.name])))
        default = None if f.name in DERIVED else f.default
        about, unset = m["help"], m["unset"]  # catalog messages (capsviz.config.option)
        shown = t(unset) if default is None else default
        said = t(about, datasets=", ".join(DATASET_NAMES), kinds=kinds)
        kw = {"dest": f.name, "default": default, "help": t("{help} (default: {default})", help=said, default=shown)}
        if kind is bool:
            kw |= {"action": "store_const", "const": False} if m["flag"].startswith("--no-") else {"action": "store_true"}
        elif m["choices"]:
            kw["choices"] = list(m["choices"]() if callable(m["choices"]) else m["choices"])
        elif m["parse"]:
            kw["type"] = checked(m["parse"])
        elif kind is int:
            kw["type"] = integer(m["lo"], m["hi"])
        elif kind is float:
            kw["type"] = number(m["lo"], m["hi"], lo_open=m["lo_open"])
        p.add_argument(m["flag"] or "--" + f.name.replace("_", "-"), **kw)


# Run fields whose default the CLI leaves to `cmd_train`, which derives it from another flag
DERIVED = ("decay_steps",)


def cmd_train(args) -> int:
    stop, plan = SignalFlag(), None

    def graceful(signum, frame):  # SIGTERM (kill, a batch system's time limit): save where we are and exit
        stop.set()

    previous = signal.signal(signal.SIGTERM, graceful)  # first: a TERM during the imports below is heeded too
    try:
        from capsviz import checkpoint as ckpt
        from capsviz.devices import pick_device
        from capsviz.train import default_decay_steps, train

        run = TrainRun(**{f.name: getattr(args, f.name) for f in dataclasses.fields(TrainRun)})
        run = dataclasses.replace(run, decay_steps=args.decay_steps or default_decay_steps(args.dataset))
        pick_device(run.device)
        data_folder(run.data_dir)
        for flag, path in (("--resume", args.resume), ("--init-from", run.init_from)):
            if path is not None and not Path(path).is_file():
                raise CapsvizError(t("{flag} {path}: no such checkpoint file", flag=flag, path=path))
        plan = ckpt.plan_write(args.out, resume=args.resume, replace=args.replace)  # refused now, not after the data loads
        said = fits(run) if args.resume is None else []  # a resumed run fitted when it started
        meta = train(run, args.out, on_event=ProgressBar(intro=said), stop=stop, resume=args.resume, replace=args.replace)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut this short
        print("\n" + t("interrupted: {what}", what=saved_words(plan)), file=sys.stderr)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)
    if meta is None:  # a rank other than 0 under torchrun
        return 0
    if not meta.complete:  # stopped by SIGTERM; the progress line said where it is saved
        return 128 + signal.SIGTERM
    print(json.dumps({"checkpoint": str(args.out), **meta.metrics.to_dict()}))
    return 0


def fits(run: TrainRun) -> list[str]:
    """What a user's dataset holds, and the run's memory and time per epoch
    (capsviz.estimate.for_run, which raises CapsvizError when it will not fit): the lines the
    run's progress starts with."""
    from capsviz.config import user_dataset
    from capsviz.estimate import for_run, size_refusal

    said = []
    if user_dataset(run.dataset):
        from capsviz.data import input_shape
        from capsviz.data.user import load_user, summary_line

        said.append(summary_line(load_user(run.dataset, run.resize)))
        shape = input_shape(run.dataset, run.resize)
        if why := size_refusal(run.model, shape.size, shape.channels, shape.num_classes):
            raise CapsvizError(why)
    return [*said, for_run(run).line()]


def saved_words(plan) -> str:
    """Where an interrupted run's last save is, and how to go on, or that it saved nothing: the
    file it saves to exists only once it has saved (it is new, or the run it continues)."""
    if plan is None:
        return t("before training started; nothing was saved")
    from capsviz.checkpoint import describe
    from capsviz.train import continue_with

    if not plan.work.exists() and plan.target.exists():
        return t("nothing was saved (a run saves after each epoch and when stopped with kill); {path} is unchanged", path=plan.target)
    if not plan.work.exists():
        return t("nothing was saved (a run saves after each epoch and when stopped with kill)")
    return t("the last saved checkpoint is {path} ({model}); {how}", path=plan.work, model=describe(plan.work), how=continue_with(plan))


class SignalFlag:
    """The stop signal a SIGTERM handler raises: a plain attribute, no lock. A threading.Event
    deadlocks when a second SIGTERM arrives (`kill` plus `timeout`, a batch system signalling every
    process) while the first handler holds the Event's lock inside set(): the handler runs on the
    thread it interrupted, so the second waits for a lock the first can never release."""

    def __init__(self):
        self.raised = False

    def set(self) -> None:
        self.raised = True

    def is_set(self) -> bool:
        return self.raised


class ProgressBar:
    """One updating line: step, images/s, loss, accuracy, time left; one line per evaluation."""

    def __init__(self, stream=sys.stderr, intro: list[str] = ()):
        self.stream, self.last, self.intro = stream, 0.0, list(intro)

    def __call__(self, e) -> None:
        if self.intro and e.kind != "failed":  # said once the run has started: a refusal stays one line
            self.stream.write("".join(line + "\n" for line in self.intro))
            self.intro = []
        if e.kind == "step":
            now = time.monotonic()
            if now - self.last < 0.5 and e.step != e.total_steps:
                return
            self.last = now
            frac = e.step / max(e.total_steps, 1)
            bar = "#" * int(24 * frac) + "-" * (24 - int(24 * frac))
            said = t(
                "{step}/{total} {rate} img/s  loss {loss}  acc {accuracy}%  left {left}",
                step=e.step,
                total=e.total_steps,
                rate=f"{e.images_per_s:6.0f}",
                loss=f"{e.loss:.4f}",
                accuracy=f"{e.accuracy:5.1f}",
                left=_hms(e.eta_s),
            )
            self.stream.write(f"\r[{bar}] {said} ")
        elif e.kind == "evaluation":
            m = e.metrics
            said = t("epoch {epoch}: test error {error}% on {n} images", epoch=e.epoch, error=f"{m['test_error']:.2f}", n=m["n_test"])
            self.stream.write(f"\n{said}\n")
        elif e.kind in ("stopped", "finished"):  # a failure is printed once, as main's `error:` line
            self.stream.write(f"\n{e.message}\n")
        self.stream.flush()


def _hms(s) -> str:
    s = int(s or 0)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"
