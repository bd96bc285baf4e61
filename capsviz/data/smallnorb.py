"""smallNORB (Hinton et al. 2018): the official binary-matrix files, read and checked.

Each split has three files, gzip or raw: `-dat` (N, 2, 96, 96) uint8 stereo pairs, `-cat` (N,)
int32 classes, `-info` (N, 4) int32 per image: instance, elevation (0-8), azimuth (0, 2, ..., 34;
x10 degrees) and lighting (0-5). We use the left image of each pair, as the paper does.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from capsviz.data import sources
from capsviz.data.idx import read_bytes
from capsviz.data.sources import Source
from capsviz.errors import CapsvizError
from capsviz.i18n import t

CLASS_NAMES = ("animal", "human", "airplane", "truck", "car")
URL = "https://cs.nyu.edu/~ylclab/data/norb-v1.0-small/"
FILES = {
    split: {kind: f"smallnorb-5x{tag}x9x18x6x2x96x96-{split}-{kind}.mat" for kind in ("dat", "cat", "info")}
    for split, tag in (("training", "46789"), ("testing", "01235"))
}
_MAGIC = {0x1E3D4C55: np.uint8, 0x1E3D4C54: np.int32}


def read_matrix(path: Path) -> np.ndarray:
    return parse_matrix(read_bytes(path), path)


def parse_matrix(data: bytes, name: Path | str) -> np.ndarray:
    if len(data) < 8:
        raise CapsvizError(t("{path}: too short to be a smallNORB matrix file", path=name))
    magic, ndim = struct.unpack("<ii", data[:8])
    magic &= 0xFFFFFFFF
    if magic not in _MAGIC:
        raise CapsvizError(t("{path}: not a smallNORB matrix file (magic {magic})", path=name, magic=f"{magic:#x}"))
    header = 8 + 4 * max(3, ndim)
    dims = struct.unpack(f"<{ndim}i", data[8 : 8 + 4 * ndim])
    dtype = np.dtype(_MAGIC[magic]).newbyteorder("<")
    if any(d < 0 for d in dims):
        raise CapsvizError(t("{path}: negative dimension in shape {shape}", path=name, shape=dims))
    need = math.prod(dims) * dtype.itemsize  # Python ints: a huge header cannot overflow
    if len(data) - header != need:
        raise CapsvizError(
            t(
                "{path}: header promises shape {shape} ({need} bytes), file has {found}",
                path=name,
                shape=dims,
                need=need,
                found=len(data) - header,
            )
        )
    return np.frombuffer(data, dtype=dtype, offset=header).reshape(dims)


def write_matrix(path: Path, array: np.ndarray) -> None:
    """Write the same format (tests and fixtures)."""
    magic = 0x1E3D4C55 if array.dtype == np.uint8 else 0x1E3D4C54
    dims = list(array.shape) + [1] * (3 - array.ndim)
    body = struct.pack("<ii", magic - (1 << 32) if magic >= 1 << 31 else magic, array.ndim)
    body += struct.pack(f"<{len(dims)}i", *dims) + array.astype(array.dtype.newbyteorder("<")).tobytes()
    Path(path).write_bytes(body)


@dataclass(frozen=True)
class NorbSet:
    images: torch.Tensor  # (N, 96, 96) uint8, left camera
    labels: torch.Tensor  # (N,) int64
    info: torch.Tensor  # (N, 4): instance, elevation, azimuth, lighting


# The official site publishes no checksums: downloads are checked by parsing them in full.
NORB_SOURCE = Source(
    name="smallnorb",
    files={n: None for split in FILES.values() for n in split.values()},
    mirrors=(URL,),
    check=parse_matrix,
)


def locate(data_dir=None) -> tuple[Path | None, list[Path]]:
    """The first of the usual places (see sources.py) holding all six smallNORB files."""
    return sources.locate(NORB_SOURCE, data_dir)


def download(dest: Path | None = None, progress=None) -> Path:
    """Fetch the six official files (about 250 MB compressed) into dest (default: the user cache)."""
    return sources.download(NORB_SOURCE, dest, progress, timeout=60)


def load_smallnorb(folder: Path, split: str = "training") -> NorbSet:
    folder = Path(folder)
    paths = {}
    for kind, name in FILES[split].items():
        for cand in (folder / (name + ".gz"), folder / name):
            if cand.is_file():
                paths[kind] = cand
                break
        else:
            raise CapsvizError(t("smallNORB file {name}(.gz) not in {folder}; download it from {url}", name=name, folder=folder, url=URL))
    dat, cat, info = (read_matrix(paths[k]) for k in ("dat", "cat", "info"))
    if dat.ndim != 4 or dat.shape[1:] != (2, 96, 96):
        raise CapsvizError(t("{path}: expected (N, 2, 96, 96) images, found {shape}", path=paths["dat"], shape=dat.shape))
    if not len(dat) == len(cat) == len(info) or info.shape[1:] != (4,):
        raise CapsvizError(
            t(
                "smallNORB {split}: {images} images, {labels} labels and {rows} info rows; each image needs its label and its info row",
                split=split,
                images=len(dat),
                labels=len(cat),
                rows=len(info),
            )
        )
    return NorbSet(torch.from_numpy(dat[:, 0].copy()), torch.from_numpy(cat.astype(np.int64)), torch.from_numpy(info.astype(np.int64)))
