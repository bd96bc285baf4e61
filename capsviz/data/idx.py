"""The IDX file format of MNIST and Fashion-MNIST (gzip or raw), read with every check a user needs."""

from __future__ import annotations

import gzip
import io
import math
import struct
import zlib
from pathlib import Path

import numpy as np

from capsviz.errors import CapsvizError
from capsviz.i18n import t

_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}
# The largest file any dataset here needs decoded is a smallNORB image file (448 MB); a header or
# gzip stream that promises more is refused before anything of that size is allocated.
MAX_DECODED_BYTES = 1 << 30


def read_bytes(path: Path) -> bytes:
    """File contents, un-gzipped when the file is gzip (by its magic, not its name)."""
    return decode_bytes(_read_raw(path), path)


def _read_raw(path: Path) -> bytes:
    path = Path(path)
    try:
        if path.stat().st_size > MAX_DECODED_BYTES:
            raise CapsvizError(
                t(
                    "{path}: {size} bytes; no dataset file here is larger than {most}",
                    path=path,
                    size=f"{path.stat().st_size:,}",
                    most=f"{MAX_DECODED_BYTES:,}",
                )
            )
        return path.read_bytes()
    except OSError as e:
        raise CapsvizError(t("{path}: cannot read ({why})", path=path, why=e.strerror)) from None


def _stream(raw: bytes) -> io.BufferedIOBase:
    return gzip.GzipFile(fileobj=io.BytesIO(raw)) if raw[:2] == b"\x1f\x8b" else io.BytesIO(raw)


def _read(stream, n: int, name) -> bytes:
    """Up to n bytes of a (possibly gzip) stream, a bad gzip as one CapsvizError."""
    try:
        return stream.read(n)
    except (EOFError, OSError, zlib.error) as e:
        raise CapsvizError(t("{path}: corrupt or truncated gzip ({why}); delete it and download again", path=name, why=e)) from None


def decode_bytes(raw: bytes, name: Path | str, limit: int = MAX_DECODED_BYTES) -> bytes:
    """`raw` un-gzipped when it is gzip, refused when it would expand beyond `limit`: first by the
    size the gzip trailer declares (mod 2^32), then by reading at most limit + 1 bytes."""
    if raw[:2] != b"\x1f\x8b":
        return raw
    if len(raw) >= 4 and struct.unpack("<I", raw[-4:])[0] > limit:
        raise CapsvizError(
            t(
                "{path}: gzip declares {size} bytes; at most {most} are read",
                path=name,
                size=f"{struct.unpack('<I', raw[-4:])[0]:,}",
                most=f"{limit:,}",
            )
        )
    data = _read(_stream(raw), limit + 1, name)
    if len(data) > limit:
        raise CapsvizError(
            t("{path}: gzip expands to more than {most} bytes; no dataset file here is that large", path=name, most=f"{limit:,}")
        )
    return data


def read_idx(path: Path, expect_ndim: int | None = None) -> np.ndarray:
    """An IDX file; a gzip one is decompressed only as far as its header promises, so a small
    file cannot expand into gigabytes in memory."""
    return _parse(_stream(_read_raw(path)), path, expect_ndim)


def _parse(stream, path, expect_ndim: int | None) -> np.ndarray:
    """IDX header: two zero bytes, a type code, the number of dims, then one big-endian int32 per
    dim. The data size the dims promise is checked against MAX_DECODED_BYTES, then against what
    the stream really holds, before anything that size is allocated."""
    magic = _read(stream, 4, path)
    if len(magic) < 4 or magic[0] != 0 or magic[1] != 0 or magic[2] not in _DTYPES:
        if not magic:
            raise CapsvizError(t("{path}: not an IDX file (it is empty)", path=path))
        raise CapsvizError(t("{path}: not an IDX file (bad magic number {magic})", path=path, magic=magic.hex()))
    ndim = magic[3]
    if expect_ndim is not None and ndim != expect_ndim:
        raise CapsvizError(
            t("{path}: expected {want}-dimensional IDX data, found {ndim} dimensions", path=path, want=expect_ndim, ndim=ndim)
        )
    head = _read(stream, 4 * ndim, path)
    if len(head) < 4 * ndim:
        raise CapsvizError(t("{path}: truncated IDX header", path=path))
    dims = struct.unpack(f">{ndim}I", head)
    dtype = np.dtype(_DTYPES[magic[2]])
    need = math.prod(dims) * dtype.itemsize  # Python ints: no overflow, however large the dims
    if need > MAX_DECODED_BYTES:
        raise CapsvizError(
            t(
                "{path}: header promises {need} bytes of data for shape {shape}; no dataset file here holds more than {most}",
                path=path,
                need=f"{need:,}",
                shape=dims,
                most=f"{MAX_DECODED_BYTES:,}",
            )
        )
    data = _read(stream, need + 1, path)
    if len(data) > need:
        raise CapsvizError(
            t("{path}: header promises {need} bytes of data for shape {shape}, file has more", path=path, need=need, shape=dims)
        )
    if len(data) < need:
        raise CapsvizError(
            t(
                "{path}: header promises {need} bytes of data for shape {shape}, file has {found}",
                path=path,
                need=need,
                shape=dims,
                found=len(data),
            )
        )
    return np.frombuffer(data, dtype=dtype).reshape(dims)


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
