"""What a served class would otherwise compute once per student: results kept once per process,
keyed by everything they are made from, within a memory budget, the least recently used let go
first.

A key is built from the arguments themselves (`digest`): arrays by their bytes, names and numbers
by value, so two sessions share a result only when they asked for exactly the same thing, and an
argument that cannot be keyed this way (a model, a trace object) is refused rather than guessed
at. The caller names what such an argument stands for instead (a model's key, an image's digest).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

import numpy as np

PLAIN = {str, int, float, bool, type(None)}  # values whose repr is the value and its type


def digest(*parts: Any) -> Hashable:
    """A key for `parts`: strings, numbers, booleans, None, arrays (dtype, shape and bytes) and
    tuples, lists and dicts of them. Anything else raises TypeError: it has no value to key by."""
    h = hashlib.blake2b(digest_size=16)

    def feed(x: Any) -> None:
        if x is None or isinstance(x, bool | int | float | str | complex | np.generic):
            h.update(f"{type(x).__name__}:{x!r};".encode())
        elif isinstance(x, bytes):
            h.update(b"bytes:%d;" % len(x))
            h.update(x)
        elif isinstance(x, np.ndarray):
            a = np.ascontiguousarray(x)
            if a.dtype.kind == "O":
                feed(a.tolist())
                return
            h.update(f"array:{a.dtype.str}:{a.shape};".encode())
            h.update(a.tobytes())
        elif isinstance(x, list | tuple):
            if all(type(item) in PLAIN for item in x):  # names, numbers: their repr in one go (a 1,152-name hover list)
                h.update(f"{type(x).__name__}:{x!r};".encode())
                return
            h.update(f"{type(x).__name__}:{len(x)}(".encode())
            for item in x:
                feed(item)
            h.update(b")")
        elif isinstance(x, dict):
            h.update(f"dict:{len(x)}(".encode())
            for k in sorted(x, key=repr):
                feed(k)
                feed(x[k])
            h.update(b")")
        else:
            raise TypeError(f"cannot key a result by a {type(x).__name__}: name what it stands for instead")

    feed(parts)
    return h.digest()


class Memo:
    """A thread-safe store of results by key, within `budget` bytes (each result's size is given
    when it is stored). Two sessions asking for the same missing result at once may both compute
    it: the results are equal, and neither waits for the other."""

    def __init__(self, budget: int):
        self.budget = budget
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.size = 0

    def get(self, key: Hashable, make: Callable[[], Any], size: Callable[[Any], int]) -> Any:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                return found[0]
        value = make()
        n = int(size(value))
        if n > self.budget:  # larger than the whole store: used once, never kept
            return value
        with self._lock:
            if key not in self._entries:
                self._entries[key] = (value, n)
                self.size += n
            while self.size > self.budget:
                _, (_, dropped) = self._entries.popitem(last=False)
                self.size -= dropped
        return value

    def __len__(self) -> int:
        return len(self._entries)
