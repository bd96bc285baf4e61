"""The command line's arguments: argparse's words and help in the reader's language, its
refusals as every other mistake, and the argument types and checks the commands share."""

from __future__ import annotations

import argparse
import contextlib
import math
import unicodedata
from pathlib import Path

from capsviz import i18n
from capsviz.errors import CapsvizError
from capsviz.i18n import LANGUAGES, N_, t, tn

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


def data_folder(data_dir) -> None:
    """A --data-dir that is not a folder is refused, never passed over for another place."""
    if data_dir is not None and not Path(data_dir).is_dir():
        raise CapsvizError(t("--data-dir {folder}: no such folder", folder=data_dir))
