"""Models' names: the shipped ones no writer replaces (`SHIPPED`, `is_shipped`) and the file stem a
name given by a person becomes (`model_stem`), refused where it looks like another."""

from __future__ import annotations

import unicodedata
from pathlib import Path

from capsviz import paths
from capsviz.errors import CapsvizError
from capsviz.i18n import t

# The models that come with capsviz (checkpoints/; RESULTS.md says how each was trained). No
# writer ever writes a file of these names in the shipped folder or the app's model folder.
SHIPPED = frozenset(
    {
        "capsnet-fashion-mnist",
        "capsnet-mnist",
        "capsnet-multimnist",
        "capsnet-one-iteration-mnist",
        "capsnet-small-mnist",
        "capsnet-small-multimnist",
        "capsnet-small-random-mnist",
        "capsnet-small-random-multimnist",
        "capsnet-small-uniform-mnist",
        "capsnet-small-uniform-multimnist",
        "cnn-small-mnist",
        "efficient-capsnet-mnist",
        "matrix-small-mnist",
    }
)


def is_shipped(path: Path) -> bool:
    """Whether `path` is one of the shipped models: in the shipped folder, or the copy in the app's
    model folder. Names compare without case: on macOS and Windows disks they are the same file."""
    path = Path(path)
    if path.suffix != ".safetensors" or path.stem.lower() not in SHIPPED:
        return False
    folder = path.parent.resolve()
    return folder in (paths.shipped_checkpoints().resolve(), paths.checkpoint_dir().resolve())


MAX_NAME = 64  # characters of a model's name


# Letters that look like Latin ones in most fonts (Cyrillic, Greek), and Latin letters and digits
# that look like each other, each sent to one stand-in: two names with the same `skeleton` are
# confusable. Fullwidth and other compatibility forms are folded by NFKC before this.
_LOOKALIKE = str.maketrans(
    {
        **dict.fromkeys("аɑα", "a"),
        **dict.fromkeys("ьƅв", "b"),
        **dict.fromkeys("сϲ", "c"),
        **dict.fromkeys("ԁ", "d"),
        **dict.fromkeys("еєε", "e"),
        **dict.fromkeys("һ", "h"),
        **dict.fromkeys("іıιї1|ӏ", "l"),
        **dict.fromkeys("јϳ", "j"),
        **dict.fromkeys("кκ", "k"),
        **dict.fromkeys("м", "m"),
        **dict.fromkeys("пη", "n"),
        **dict.fromkeys("оοσ0", "o"),
        **dict.fromkeys("рρ", "p"),
        **dict.fromkeys("ԛ", "q"),
        **dict.fromkeys("ѕ5", "s"),
        **dict.fromkeys("тτ", "t"),
        **dict.fromkeys("υս", "u"),
        **dict.fromkeys("νѵ", "v"),
        **dict.fromkeys("ԝω", "w"),
        **dict.fromkeys("хχ", "x"),
        **dict.fromkeys("уγ", "y"),
        **dict.fromkeys("2", "z"),
        **dict.fromkeys("_", "-"),
        "i": "l",
    }
)


def skeleton(name: str) -> str:
    """What a name looks like: NFKC, casefolded, look-alike letters made one, "rn" as "m",
    "vv" as "w". Two names with one skeleton are confusable."""
    folded = unicodedata.normalize("NFKC", name).casefold().translate(_LOOKALIKE)
    return folded.replace("rn", "m").replace("vv", "w")


def model_stem(text: str, existing=()) -> str:
    """The file stem a "Save as" text gives: NFKC-normalised, letters (any script), digits, '-'
    and '_' only, at most MAX_NAME characters. Raises CapsvizError when nothing usable is left,
    another character is in it, the name is a shipped model's, or it is confusable with one of
    `existing` (stems of the models there) without being that very name. Spaces become '-'."""
    name = "-".join(unicodedata.normalize("NFKC", str(text)).split())
    if not name:
        raise CapsvizError(t("Give the model a name made of letters, digits, '-' or '_'."))
    odd = sorted({ch for ch in name if not (ch in "-_" or unicodedata.category(ch)[0] == "L" or unicodedata.category(ch) == "Nd")})
    if odd:
        shown = " ".join(repr(ch) if ch.isprintable() and not ch.isspace() else f"U+{ord(ch):04X}" for ch in odd[:5])
        raise CapsvizError(t("A model's name is made of letters, digits, '-' and '_' only, not {shown}.", shown=shown))
    if len(name) > MAX_NAME:
        raise CapsvizError(t("A model's name is at most {most} characters long; this one has {n}.", most=MAX_NAME, n=len(name)))
    if name.strip("-_") != name or not name.strip("-_"):
        raise CapsvizError(t("A model's name starts and ends with a letter or a digit."))
    look = skeleton(name)
    for other in sorted(SHIPPED) + sorted(existing):
        if name.lower() in SHIPPED:  # lower: on a case-insensitive disk (macOS, Windows) it is the same file
            raise CapsvizError(
                t("{name} is one of the models that come with capsviz and cannot be replaced; choose a new name.", name=name)
            )
        if other != name and skeleton(other) == look:
            raise CapsvizError(
                t("{name} looks like {other}, a model already there; choose a name that looks different.", name=name, other=other)
            )
    return name
