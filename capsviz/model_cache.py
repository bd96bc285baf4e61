"""The models the app's browser sessions share: each file version loaded once, kept while the
models fit a memory budget, the least recently used let go first.

A count of models is the wrong limit: a class spread over five models, with the robustness page
loading three at once, would make sessions evict each other's models in a loop; and one paper
CapsNet weighs as much as a dozen small models. The budget is in bytes instead: the machine's
(`$CAPSVIZ_MODEL_MEMORY_MB`, default a quarter of its memory, at most 2 GB), shared evenly by the
app processes that serve one class (`$CAPSVIZ_REPLICAS`, set by `capsviz app --replicas`).

Loaded models are shared read-only: nothing a session does changes one (routing iterations and
other per-request settings are passed per call). Two sessions asking for the same model at once
wait for one load.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections import OrderedDict
from pathlib import Path

import torch

from capsviz.checkpoint import load_checkpoint
from capsviz.schema import CheckpointMeta

# What a model costs beside its weights: the fast paths keep a copy of some weights in their own
# layout (capsviz.kernels), and a forward pass holds activations while it runs.
OVERHEAD = 3


def default_budget() -> int:
    """Bytes for this process: the machine's budget ($CAPSVIZ_MODEL_MEMORY_MB, else a quarter of
    physical memory, at most 2 GB) over the number of app processes ($CAPSVIZ_REPLICAS, else 1)."""
    if os.environ.get("CAPSVIZ_MODEL_MEMORY_MB"):
        machine = int(float(os.environ["CAPSVIZ_MODEL_MEMORY_MB"]) * 2**20)
    else:
        try:
            physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):  # not on every platform
            physical = 8 * 2**30
        machine = min(physical // 4, 2 * 2**30)
    return machine // replicas()


def replicas() -> int:
    """The app processes that share this machine's budget: $CAPSVIZ_REPLICAS, at least 1."""
    try:
        return max(int(os.environ.get("CAPSVIZ_REPLICAS", "1")), 1)
    except ValueError:
        return 1


def footprint(model: torch.nn.Module) -> int:
    """About the bytes a loaded model holds: weights and buffers, times OVERHEAD."""
    return OVERHEAD * sum(t.numel() * t.element_size() for t in model.state_dict().values())


class ModelCache:
    """get(path) -> (model, meta), loaded once per (path, modification time, size)."""

    def __init__(self, budget: int | None = None, log=True):
        self.budget = default_budget() if budget is None else budget
        self.loads = 0  # every load from disk, for load tests: reloads in a loop show here
        self.evictions = 0
        self._log = log
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple, tuple[torch.nn.Module, CheckpointMeta, int]] = OrderedDict()
        self._gates: dict[tuple, threading.Lock] = {}

    def get(self, path: Path) -> tuple[torch.nn.Module, CheckpointMeta]:
        path = Path(path)
        st = path.stat()
        key = (str(path), st.st_mtime_ns, st.st_size)
        with self._lock:
            hit = self._hit(key)
            if hit is not None:
                return hit
            gate = self._gates.setdefault(key, threading.Lock())
        with gate:  # one load per key; others wait here, then find it
            with self._lock:
                hit = self._hit(key)
                if hit is not None:
                    return hit
            start = time.perf_counter()
            model, meta = load_checkpoint(path)
            took = time.perf_counter() - start
            size = footprint(model)
            with self._lock:
                for old in [k for k in self._entries if k[0] == key[0]]:  # an older version of the file
                    del self._entries[old]
                self._entries[key] = (model, meta, size)
                self._gates.pop(key, None)
                self.loads += 1
                while len(self._entries) > 1 and self.used() > self.budget:
                    self._entries.popitem(last=False)
                    self.evictions += 1
                held = len(self._entries), self.used()
        if self._log:
            # one line in the server's log per load: a load test counts them (tests/load/protocol.py)
            print(
                f"capsviz: loaded model {path.name} in {took:.2f} s ({size / 2**20:.0f} MB; {held[0]} models held, "
                f"{held[1] / 2**20:.0f} MB; pid {os.getpid()})",
                file=sys.stderr,
                flush=True,
            )
        return model, meta

    def holds(self, path: Path) -> bool:
        """Whether `get(path)` will answer without loading (for a spinner only when it loads)."""
        st = Path(path).stat()
        with self._lock:
            return (str(path), st.st_mtime_ns, st.st_size) in self._entries

    def _hit(self, key):
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0], entry[1]

    def used(self) -> int:
        return sum(size for _, _, size in self._entries.values())

    def held(self) -> list[str]:
        with self._lock:
            return [Path(k[0]).name for k in self._entries]
