"""The IDX file format of MNIST and Fashion-MNIST (gzip or raw), read with every check a user needs."""

from __future__ import annotations

import gzip
import struct
import zlib
from pathlib import Path

import numpy as np

from capsviz.errors import CapsvizError

_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}


def read_bytes(path: Path) -> bytes:
    """File contents, un-gzipped when the file is gzip (by its magic, not its name)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise CapsvizError(f"{path}: cannot read ({e.strerror})") from None
    return decode_bytes(raw, path)


def decode_bytes(raw: bytes, name: Path | str) -> bytes:
    if raw[:2] == b"\x1f\x8b":
        try:
            return gzip.decompress(raw)
        except (EOFError, OSError, zlib.error) as e:
            raise CapsvizError(f"{name}: corrupt or truncated gzip ({e}); delete it and download again") from None
    return raw


def parse_idx(data: bytes, path: Path | str = "<bytes>", expect_ndim: int | None = None) -> np.ndarray:
    """IDX header: two zero bytes, a type code, the number of dims, then one big-endian int32 per dim."""
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _DTYPES:
        raise CapsvizError(f"{path}: not an IDX file (bad magic number {data[:4].hex() or 'empty'})")
    ndim = data[3]
    if expect_ndim is not None and ndim != expect_ndim:
        raise CapsvizError(f"{path}: expected {expect_ndim}-dimensional IDX data, found {ndim} dimensions")
    header = 4 + 4 * ndim
    if len(data) < header:
        raise CapsvizError(f"{path}: truncated IDX header")
    dims = struct.unpack(f">{ndim}I", data[4:header])
    dtype = np.dtype(_DTYPES[data[2]])
    need = int(np.prod(dims)) * dtype.itemsize
    if len(data) - header != need:
        raise CapsvizError(f"{path}: header promises {need} bytes of data for shape {dims}, file has {len(data) - header}")
    return np.frombuffer(data, dtype=dtype, offset=header).reshape(dims)


def read_idx(path: Path, expect_ndim: int | None = None) -> np.ndarray:
    return parse_idx(read_bytes(path), path, expect_ndim)


def write_idx(path: Path, array: np.ndarray, compress: bool | None = None) -> None:
    """Write an IDX file (gzip when the name ends in .gz); used by tests and fixtures."""
    array = np.ascontiguousarray(array)
    code = {np.dtype(np.uint8): 0x08, np.dtype(np.int8): 0x09, np.dtype(np.int32): 0x0C, np.dtype(np.float32): 0x0D}[array.dtype]
    body = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    body += array.astype(array.dtype.newbyteorder(">")).tobytes()
    path = Path(path)
    if compress if compress is not None else path.suffix == ".gz":
        body = gzip.compress(body, compresslevel=1)
    path.write_bytes(body)
