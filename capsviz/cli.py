"""capsviz (or python -m capsviz) app | doctor | train | evaluate | list | bench | export | import | data

Every mistake a user can make ends with one line on stderr and exit status 2, never a traceback.
Every word it prints for a person (help, progress, results, refusals) is in the language of the
command line: `--lang`, else the environment's as gettext programs read it (LANGUAGE, LC_ALL,
LC_MESSAGES, LANG); what scripts read (JSON, CSV, file names) is the same in every language.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import math
import os
import re
import signal
import sys
import threading
import time
import typing
import unicodedata
from pathlib import Path

from capsviz import i18n
from capsviz.config import DATASET_NAMES, MAX_ITERATIONS, PRESETS, USER_KINDS, TrainRun, check_dataset
from capsviz.errors import CapsvizError
from capsviz.families.capsnet.config import CLASS_SQUASH_AXES
from capsviz.i18n import LANGUAGES, N_, t, tn
from capsviz.progress import duration, seconds_left

# argparse's own words, as it writes them: its usage line, its section titles, -h's help and its
# refusals. argparse looks each up through the gettext functions it imported (`argparse._`,
# `argparse.ngettext`), which `speaking_argparse` points at the catalog while the command line is read.
ARGPARSE_WORDS = (
    N_("usage: "),
    N_("positional arguments"),
    N_("options"),
    N_("show this help message and exit"),
    N_("argument %(argument_name)s: %(message)s"),
    N_("the following arguments are required: %s"),
    N_("unrecognized arguments: %s"),
    N_("invalid choice: %(value)r (choose from %(choices)s)"),
    N_("invalid %(type)s value: %(value)r"),
    N_("expected one argument"),
    N_("expected at most one argument"),
    N_("expected at least one argument"),
    N_("ambiguous option: %(option)s could match %(matches)s"),
    N_("not allowed with argument %s"),
    N_("ignored explicit argument %r"),
    N_("one of the arguments %s is required"),
)


def _argparse_plural(singular: str, plural: str, n: int) -> str:
    if singular == "expected %s argument":  # argparse's one plural message ("expected 2 arguments")
        return tn("expected %s argument", "expected %s arguments", n)
    return singular if n == 1 else plural


@contextlib.contextmanager
def speaking_argparse():
    """argparse's words from the catalog, in the language of now, inside the block."""
    before = argparse._, argparse.ngettext
    argparse._, argparse.ngettext = t, _argparse_plural
    try:
        yield
    finally:
        argparse._, argparse.ngettext = before


def columns(text: str) -> int:
    """The terminal columns `text` takes: two for a Chinese or Japanese character, one for the rest."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


# Where Chinese and Japanese lines are not broken: after an opening bracket, before closing punctuation
OPENING, CLOSING = "（「『【《“", "，。、；：！？）」』】》”"


def wrap(text: str, width: int) -> list[str]:
    """`text` in lines of at most `width` terminal columns, broken after a space or after a wide
    character (Chinese and Japanese have no spaces between words), never after an opening bracket
    or before closing punctuation."""
    lines, line = [], ""
    for ch in " ".join(text.split()):
        if line and columns(line + ch) > width:
            if ch == " ":
                lines.append(line)
                line = ""
                continue
            cut = max((k for k in breaks(line + ch) if k <= len(line)), default=len(line))
            lines.append(line[:cut].rstrip())
            line = line[cut:].lstrip()
        line += ch
    return lines + [line] if line else lines


def breaks(text: str) -> list[int]:
    """Where `text` may be broken: after a space, or after a wide character that is not an opening
    bracket and is not followed by closing punctuation."""
    return [
        k + 1
        for k, ch in enumerate(text)
        if (ch == " " or (columns(ch) == 2 and ch not in OPENING)) and (k + 1 == len(text) or text[k + 1] not in CLOSING)
    ]


class Formatter(argparse.HelpFormatter):
    """argparse's help, with Chinese and Japanese lines wrapped to the terminal's width (argparse
    counts a character as one column, and such text has no spaces to break at)."""

    def _split_lines(self, text, width):
        return wrap(text, width) if columns(text) > len(text) else super()._split_lines(text, width)

    def _fill_text(self, text, width, indent):
        if columns(text) == len(text):
            return super()._fill_text(text, width, indent)
        return "\n".join(indent + line for line in wrap(text, width - len(indent)))


class Parser(argparse.ArgumentParser):
    """argparse, with a bad argument reported as every other mistake is: one `error:` line, exit 2
    (argparse's own prints the usage first and exits inside parse_args), and its help in the
    reader's language (`Formatter`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, formatter_class=Formatter, **kwargs)

    def error(self, message: str):
        raise CapsvizError(f"{self.prog}: {message}")


def integer(lo: int, hi: int | None = None):
    """An argparse type: an integer in [lo, hi]."""

    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(t("must be an integer, found {found}", found=repr(text))) from None
        if hi is not None and not lo <= v <= hi:
            raise argparse.ArgumentTypeError(t("must be an integer in [{lo}, {hi}], found {found}", lo=lo, hi=hi, found=v))
        if v < lo:
            raise argparse.ArgumentTypeError(t("must be an integer >= {lo}, found {found}", lo=lo, found=v))
        return v

    return parse


def checked(parse):
    """An argparse type from a function that raises CapsvizError for a bad value."""

    def check(text: str):
        try:
            return parse(text)
        except CapsvizError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return check


def number(lo: float, hi: float, lo_open: bool = False):
    """An argparse type: a finite number in [lo, hi] ((lo, hi] with `lo_open`)."""

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(t("must be a number, found {found}", found=repr(text))) from None
        if not math.isfinite(v) or v < lo or v > hi or (lo_open and v == lo):
            said = dict(lo=f"{lo:g}", hi=f"{hi:g}", found=text)
            raise argparse.ArgumentTypeError(
                t("must be a finite number in ({lo}, {hi}], found {found}", **said)
                if lo_open
                else t("must be a finite number in [{lo}, {hi}], found {found}", **said)
            )
        return v

    return parse


def language_tag(text: str) -> str:
    """An argparse type: a language capsviz speaks (en, zh-Hans, ja, or a tag such as zh-CN or ja_JP)."""
    found = i18n.normalise(text)
    if found is None:
        raise argparse.ArgumentTypeError(t("capsviz speaks {languages}, not {found}", languages=", ".join(LANGUAGES), found=repr(text)))
    return found


def asked_language(argv: list[str]) -> str | None:
    """--lang's value, read before the parser is made (its help is in that language): a top-level
    option, so only the arguments before the command are looked at."""
    for k, arg in enumerate(argv):
        if arg == "--lang":
            return argv[k + 1] if k + 1 < len(argv) else None
        if arg.startswith("--lang="):
            return arg.removeprefix("--lang=")
        if not arg.startswith("-"):
            return None
    return None


def named_command(argv: list[str]) -> str | None:
    """The command the arguments name, read before they are parsed (--lang's value passed over)."""
    args = iter(argv)
    for arg in args:
        if arg == "--lang":
            next(args, None)
        elif not arg.startswith("-"):
            return arg
    return None


def command_language(argv: list[str], environ=os.environ) -> str:
    """The language of this command: --lang when it names one capsviz speaks, else the environment's."""
    return i18n.normalise(asked_language(argv)) or i18n.from_environment(environ)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    with i18n.speaking(command_language(argv)), speaking_argparse():
        return run(argv)


def run(argv: list[str]) -> int:
    args = None
    try:
        p = parser()
        # `app` hands every option it does not know itself to Streamlit (--server.port 8502 ...)
        args, rest = p.parse_known_args(argv)
        if rest and args.command != "app":
            p.error(t("unrecognized arguments: %s") % " ".join(rest))
        args.streamlit_args = rest
        with interrupt_deferred():
            import torch  # noqa: F401 - every command needs it; a Ctrl-C inside its import would break it (see there)
        return COMMANDS[args.command](args)
    except CapsvizError as err:
        print(t("error: {message}", message=err), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the message or the exit short
        starting = (args.command if args is not None else named_command(argv)) == "train"  # cmd_train says more once it has started
        print(t("interrupted before training started; nothing was saved") if starting else t("interrupted"), file=sys.stderr)
        return 130


@contextlib.contextmanager
def interrupt_deferred():
    """Ctrl-C pressed inside the block takes effect as it ends: an import cut half way by
    KeyboardInterrupt leaves its module broken (torch then says "cannot load module more than once
    per process"), which would end the command with a traceback instead of its interrupted line and
    status 130. Where Ctrl-C is not Python's KeyboardInterrupt (ignored, or handled elsewhere) the
    block changes nothing."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    pressed = []
    signal.signal(signal.SIGINT, lambda signum, frame: pressed.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if pressed:
        raise KeyboardInterrupt


def entry() -> None:
    """The console script and `python -m capsviz`: main's status, with Ctrl-C ignored from the
    moment main returns, so a late one cannot kill the process on its way out (which would end it
    by the signal instead of with the status main chose)."""
    code = main()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if code == 130:  # interrupted, and said so: leave now, so no library's shutdown can turn the status into death by SIGINT
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


def parser() -> Parser:
    """The command line, its help in the language of now."""
    iterations = integer(1, MAX_ITERATIONS)
    prog = "capsviz" if Path(sys.argv[0]).stem == "capsviz" else "python -m capsviz"  # the console script or -m
    p = Parser(prog=prog, description=t("Capsule networks you can watch route."))
    p.add_argument(
        "--lang",
        type=language_tag,
        metavar="LANG",
        help=t(
            "the language of what capsviz says here: {languages} (default: LANGUAGE, LC_ALL, LC_MESSAGES or LANG, as other "
            "programs read them, else English); goes before the command",
            languages=", ".join(LANGUAGES),
        ),
    )
    sub = p.add_subparsers(dest="command", required=True)

    a = sub.add_parser(
        "app",
        help=t("start the Streamlit app (other options go to Streamlit: --server.port 8502, --server.address 0.0.0.0)"),
        description=t(
            "Start the app from any folder. Options not listed here go to `streamlit run` unchanged, "
            "e.g. --server.address 0.0.0.0 to serve a class, --server.port 8502."
        ),
    )
    a.add_argument(
        "--checkpoints",
        type=Path,
        help=t(
            "the models to show and where the Train page saves "
            "(default: $CAPSVIZ_CHECKPOINTS, checkpoints/ in a checkout, else the user folder that `capsviz doctor` prints)"
        ),
    )
    a.add_argument(
        "--replicas",
        type=integer(1),
        nargs="?",
        const=0,
        metavar="N",
        help=t("serve a class: N app processes behind nginx, one per core without N (needs nginx; capsviz/serve.py)"),
    )
    dr = sub.add_parser("doctor", help=t("device, torch, native kernel (and why it is off), data and checkpoint folders"))
    dr.add_argument(
        "--build", action="store_true", help=t("only build the native EM kernel now (as `capsviz app` does at start) and say how it went")
    )

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

    ls = sub.add_parser("list", help=t("list checkpoints with their metrics"))
    ls.add_argument("folder", type=Path, nargs="?", help=t("default: the app's folder (see `capsviz doctor`)"))

    b = sub.add_parser("bench", help=t("speed and memory of every model preset on this device"))
    b.add_argument("--models", nargs="*", default=None, choices=list(PRESETS), help=t("the presets to measure (default: all)"))
    b.add_argument("--device", default="auto", help=t("auto, cpu, cuda, cuda:N or mps"))
    b.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"], help=t("arithmetic of the forward pass (autocast)"))
    b.add_argument("--steps", type=integer(1, 10_000), default=3, help=t("timed repetitions per measurement"))
    b.add_argument("--compile", action="store_true", help=t("as train --compile (compile time not counted)"))
    b.add_argument("--routing-iterations", type=iterations, help=t("override the routed presets' iterations (default: each preset's own)"))
    b.add_argument("--json", type=Path, default=Path("bench.json"), help=t("where to save the results"))
    b.add_argument(
        "--convolutions",
        action="store_true",
        help=t("instead: PrimaryCaps' convolution, im2col GEMM against Fourier, per batch size"),
    )
    b.add_argument(
        "--step-parts",
        choices=[n for n, c in PRESETS.items() if c.routing == "dynamic"],
        help=t("instead: ms per part of a CapsNet preset's CPU training step"),
    )
    b.add_argument(
        "--sweeps", action="store_true", help=t("instead: seconds of each page sweep at its defaults (shipped models, real data)")
    )
    b.add_argument("--one", help=argparse.SUPPRESS)  # internal: measure one preset in this process

    x = sub.add_parser("export", help=t("store a checkpoint in float16 for shipping, re-measuring its test error"))
    x.add_argument("src", type=Path, help=t("the checkpoint to store in float16"))
    x.add_argument("dst", type=Path, help=t("the checkpoint file to write"))
    x.add_argument("--data-dir", help=t("folder holding the dataset files"))
    x.add_argument("--max-change", type=number(0, 100), default=0.02, help=t("largest test-error change (percentage points) accepted"))
    x.add_argument("--replace", action="store_true", help=t("replace a model already at dst"))
    x.add_argument("--device", default="auto", help=t("auto, cpu, cuda, cuda:N or mps"))

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

    si = sub.add_parser(
        "site",
        help=t("build the static site: the explorer, routing, tour and playground computing in the browser (needs npm)"),
        description=t(
            "Write a self-contained static folder (index.html, the models as ONNX, test images) that any static host "
            "serves; the models compute in each browser with onnxruntime-web. npm fetches the pinned front-end packages once."
        ),
    )
    si.add_argument("--out", type=Path, required=True, help=t("the folder to write (e.g. site/)"))
    si.add_argument(
        "--models",
        nargs="+",
        metavar="NAME",
        help=t("models from the model folder (default: {models})", models=" ".join(SITE_MODELS)),
    )
    si.add_argument("--images", type=integer(1, 10000), default=300, help=t("test images to include (default: 300)"))
    si.add_argument("--data-dir", help=t("folder holding the dataset files"))

    d = sub.add_parser("data", help=t("where each dataset was found, its size and checksums"))
    d.add_argument("--data-dir", help=t("folder holding the dataset files"))
    d.add_argument("--download", action="store_true", help=t("fetch missing datasets from the public mirrors"))

    ts = sub.add_parser(
        "translations",
        help=t("bring the Chinese and Japanese catalogs up to date with the code's messages (needs a source checkout)"),
    )
    ts.add_argument("--check", action="store_true", help=t("change nothing; exit 1 naming each message untranslated or broken"))
    ts.add_argument(
        "--fonts",
        action="store_true",
        help=t("cut the export fonts to the catalogs' characters (needs fontTools and fonts-noto-cjk)"),
    )

    return p


# The static site's models without --models: capsviz.site.DEFAULT_MODELS, named here so that the
# help does not import the site's exporter (tests/test_cli_words.py checks they are the same)
SITE_MODELS = ("capsnet-small-mnist", "capsnet-mnist", "efficient-capsnet-mnist", "capsnet-small-multimnist", "matrix-small-mnist")


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


def cmd_app(args) -> int:
    import subprocess

    from capsviz import access

    access.check_teacher_key()  # a key a student could guess: refused before anything starts
    if args.replicas is not None:
        from capsviz import serve

        serve.nginx_binary()  # missing: say so before anything else
        args.replicas = serve.replicas_for(args.replicas)  # more than the machine can run: likewise
        command, env = app_command(args.checkpoints, serve.split_address(args.streamlit_args)[2])
    else:
        command, env = app_command(args.checkpoints, args.streamlit_args)
    print(
        t("capsviz: native EM kernel {status}", status=build_kernel()), file=sys.stderr
    )  # before the first student, not during their first page
    access.announce(Path(env["CAPSVIZ_CHECKPOINTS"]))  # the teacher key, in the host's terminal before any student arrives
    if args.replicas is not None:
        return serve.serve(command, env, args.replicas, args.streamlit_args)
    if os.name == "posix":  # become Streamlit: signals (Ctrl-C, a service manager's SIGTERM) reach it directly
        sys.stderr.flush()
        os.execve(sys.executable, command, env)
    try:
        return subprocess.call(command, env=env)
    except KeyboardInterrupt:  # Ctrl-C reaches Streamlit too, which stops on its own
        return 0


def app_command(checkpoints: Path | None, streamlit_args: list[str]) -> tuple[list[str], dict[str, str]]:
    """`streamlit run` of the app, wherever capsviz is, and its environment."""
    import tomllib

    from capsviz import paths

    env = dict(os.environ)
    if checkpoints and not checkpoints.is_dir():
        raise CapsvizError(t("--checkpoints {folder}: no such folder", folder=checkpoints))
    folder = checkpoints or paths.model_folder()
    env["CAPSVIZ_CHECKPOINTS"] = str(folder)
    # The app's Streamlit settings (.streamlit/config.toml) are only read from the folder Streamlit
    # starts in: pass them as environment variables, which the user's own flags still override.
    config = paths.app_dir() / ".streamlit" / "config.toml"
    if config.is_file():
        for section, options in tomllib.loads(config.read_text()).items():
            for key, value in options.items():
                snake = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", key)  # postScriptGC -> post_Script_GC, as Streamlit names it
                name = f"STREAMLIT_{section}_{snake}".upper()
                env.setdefault(name, str(value).lower() if isinstance(value, bool) else str(value))
    return [sys.executable, "-m", "streamlit", "run", str(paths.app_dir() / "app.py"), *streamlit_args], env


def build_kernel() -> str:
    """Build (or find built) the native EM kernel; its status in words. Concurrent builds by other
    processes wait for one another (capsviz.kernels.native)."""
    from capsviz.kernels import native

    native.available()
    return native.status()


def cmd_doctor(args) -> int:
    import platform

    if args.build:
        print(t("native EM kernel: {status}", status=build_kernel()))
        return 0

    import torch

    from capsviz import kernels, paths
    from capsviz.data import SOURCES
    from capsviz.data.sources import locate
    from capsviz.devices import describe_hardware, pick_device

    device = pick_device("auto")
    said = dict(version=__import__("capsviz").__version__, folder=paths.app_dir())
    print(
        t("capsviz {version} (checkout: {folder})", **said) if paths.is_checkout() else t("capsviz {version} (installed: {folder})", **said)
    )
    print(
        t(
            "python: {version} on {system} {machine}",
            version=platform.python_version(),
            system=platform.system(),
            machine=platform.machine(),
        )
    )
    print(t("torch: {version}, {threads} threads", version=torch.__version__, threads=torch.get_num_threads()))
    print(t("device: {device} ({hardware})", device=device.type, hardware=describe_hardware(device)))
    for k in kernels.paths(device):
        print(
            t("{path}: on ({reason})", path=k.path, reason=k.reason) if k.on else t("{path}: off ({reason})", path=k.path, reason=k.reason)
        )
    for name, source in SOURCES.items():
        place, _ = locate(source)
        print(
            t("data {name}: {place}", name=name, place=place) if place else t("data {name}: not found (capsviz data --download)", name=name)
        )
    folder = paths.model_folder()
    count = len(list(folder.glob("*.safetensors"))) if folder.is_dir() else 0
    print(tn("checkpoints: {folder} ({n} model)", "checkpoints: {folder} ({n} models)", count, folder=folder))
    print(t("shipped checkpoints: {folder}", folder=paths.shipped_checkpoints()))
    print(t("user folder: {folder} (CAPSVIZ_HOME moves it)", folder=paths.user_dir()))
    return 0


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


def data_folder(data_dir) -> None:
    """A --data-dir that is not a folder is refused, never passed over for another place."""
    if data_dir is not None and not Path(data_dir).is_dir():
        raise CapsvizError(t("--data-dir {folder}: no such folder", folder=data_dir))


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
    from capsviz.adapter import checked_words
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
        said = dict(name=path.name, family=meta.family, dataset=meta.dataset, epochs=epochs, hardware=hardware)
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
    return 0


def cmd_bench(args) -> int:
    from capsviz import bench
    from capsviz.devices import pick_device

    pick_device(args.device)  # each preset is measured in a process of its own: a bad device is said once, here
    if args.convolutions:
        print(bench.convolution_table(bench.convolutions(args.steps)))
        return 0
    if args.step_parts:
        parts = bench.capsnet_step_parts(args.step_parts, args.steps)
        total = sum(parts.values())
        for part, ms in parts.items():
            print(f"{part:10} {ms:8.1f} ms  {100 * ms / total:4.0f}%")
        return 0
    if args.sweeps:
        for name, seconds in bench.page_sweeps(Path(__file__).resolve().parents[1] / "checkpoints"):
            print(t("{seconds} s  {name}", seconds=f"{seconds:7.1f}", name=name))
        return 0
    if args.one:
        print(json.dumps(bench.measure(args.one, args.device, args.precision, args.steps, args.compile, args.routing_iterations)))
        return 0
    results = bench.run_all(args.models or list(PRESETS), args.device, args.precision, args.steps, args.compile, args.routing_iterations)
    print(bench.table(results))
    args.json.write_text(json.dumps(results, indent=1))
    print(t("saved {path}", path=args.json))
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
    for note in result["notes"]:
        print(f"  {note}", file=sys.stderr)
    print(f"{result['check']}", file=sys.stderr)
    for warning in result["warnings"]:
        print(t("warning: {message}", message=warning), file=sys.stderr)
    if args.out.resolve().parent != model_folder().resolve():
        print(t("open it in the app: {command}", command=f"capsviz app --checkpoints {args.out.resolve().parent}"), file=sys.stderr)
    print(json.dumps(result))
    return 0


def cmd_data(args) -> int:
    from capsviz.data import SOURCES
    from capsviz.data.sources import download, locate, missing_message, verify

    data_folder(args.data_dir)
    for name, source in SOURCES.items():
        place, places = locate(source, args.data_dir)
        if place is None and args.download:
            print(t("{name}: downloading ...", name=name))
            place = download(source, progress=_download_progress)
            print()
        if place is None:
            print(
                t("{name}: NOT FOUND", name=name) + "\n" + "\n".join("  " + line for line in missing_message(source, places).splitlines())
            )
            continue
        status = verify(source, place)
        size = sum(f.stat().st_size for f in place.iterdir() if f.is_file() and f.name.split(".")[0] in source.files)
        said = dict(name=name, place=place, size=f"{size / 1e6:.1f}", status=status)
        if all(v == "ok" for v in status.values()):
            print(t("{name}: {place} ({size} MB) checksums ok", **said))
        else:
            print(t("{name}: {place} ({size} MB) checksums {status}", **said))
    _data_smallnorb(args)
    return 0


def _data_smallnorb(args) -> None:
    from capsviz.data import smallnorb

    place, places = smallnorb.locate(args.data_dir)
    if place is None and args.download:
        print(t("smallnorb: downloading from the official site (about 250 MB) ..."))
        place = smallnorb.download(progress=_download_progress)
        print()
    if place is None:
        print(
            t(
                "smallnorb: NOT FOUND (looked in {places}); `python -m capsviz data --download` or get the six files from {url}",
                places=", ".join(map(str, places)),
                url=smallnorb.URL,
            )
        )
        return
    counts = {}
    for split in smallnorb.FILES:
        try:
            counts[split] = len(smallnorb.load_smallnorb(place, split).labels)
        except CapsvizError as e:
            counts[split] = t("unreadable: {why}", why=e)
    print(t("smallnorb: {place} {counts} (no published checksums: files checked by parsing)", place=place, counts=counts))


def _download_progress(name: str, got: int, total: int) -> None:
    pct = f"{100 * got / total:5.1f}%" if total else f"{got / 1e6:.1f} MB"
    sys.stdout.write(f"\r  {name}: {pct}")
    sys.stdout.flush()


def cmd_site(args) -> int:
    from capsviz import site
    from capsviz.paths import model_folder

    folder = model_folder()
    paths = []
    for name in args.models or site.DEFAULT_MODELS:
        path = folder / (name if name.endswith(".safetensors") else f"{name}.safetensors")
        if not path.is_file():
            raise CapsvizError(t("no model {name} in {folder}", name=name, folder=folder))
        paths.append(path)
    built = site.build(args.out, paths, images=args.images, data_dir=args.data_dir)
    print(
        t(
            "wrote {folder}: {models} models, {images} test images, {size} MB",
            folder=built.out,
            models=len(built.models),
            images=built.images,
            size=f"{built.bytes / 2**20:.1f}",
        )
    )
    print(
        t("try it: {command}, then open {url}", command=f"python3 -m http.server --directory {built.out} 8000", url="http://localhost:8000")
    )
    return 0


def cmd_translations(args) -> int:
    from capsviz import translations

    if args.check:
        found = translations.problems()
        print("\n".join(found) if found else t("every message is translated"))
        return 1 if found else 0
    if args.fonts:
        for lang, size in translations.cut_fonts().items():
            print(f"capsviz/fonts/{lang}.otf: {size / 1024:.0f} KB")
        return 0
    for lang, missing in translations.update().items():
        print(tn("{language}: {n} message to translate", "{language}: {n} messages to translate", missing, language=lang))
    return 0


COMMANDS = {
    "app": cmd_app,
    "doctor": cmd_doctor,
    "train": cmd_train,
    "evaluate": cmd_evaluate,
    "list": cmd_list,
    "bench": cmd_bench,
    "export": cmd_export,
    "import": cmd_import,
    "data": cmd_data,
    "site": cmd_site,
    "translations": cmd_translations,
}
