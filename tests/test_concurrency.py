"""What the app's sessions share is safe to share: a freshly loaded model called from many threads
at once (their first calls fill the fast paths' caches), the one cache of loaded models, the
kernels' switches, and the native kernel built by several processes starting together."""

import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch

from capsviz import checkpoint as ckpt
from capsviz.config import preset
from capsviz.kernels import policy
from capsviz.model_cache import ModelCache, footprint
from capsviz.models import build_model

ROOT = Path(__file__).resolve().parents[1]
THREADS = 8


def saved(tmp_path: Path, name: str, config) -> Path:
    torch.manual_seed(0)
    path = tmp_path / f"{name}.safetensors"
    ckpt.save_checkpoint(path, build_model(config), {"dataset": "mnist"})
    return path


MODELS = {
    "capsnet": preset("capsnet-small", conv1_channels=32, primary_types=8),
    "matrix": preset("matrix-small", in_size=28, num_classes=10, A=16, B=8, C=8, D=8),
}


def first_calls_at_once(model, inputs, expected) -> list[str]:
    """THREADS threads call `model` at the same moment, twice on each input; what went wrong."""
    barrier = threading.Barrier(THREADS)
    wrong: list[str] = []

    def work(k: int) -> None:
        try:
            barrier.wait()
            with torch.no_grad():
                for call in range(2):
                    for i in (k % 2, 1 - k % 2):  # half start with one image, half with four
                        if not torch.equal(model(inputs[i]).scores, expected[call][i]):
                            wrong.append(f"thread {k}, call {call}, input {i}: another answer")
        except Exception as e:  # noqa: BLE001 - a race shows as any exception
            wrong.append(f"thread {k}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return wrong


@pytest.fixture
def own_threads():
    """torch's own thread count for the test. At one thread (what a test process beside another
    gets, and a served process), MKL's pre-packed GEMM gives calls made at the same moment from
    several threads answers that differ in the last bits (a few 1e-9 in a score), so
    exact equality would test MKL's arithmetic; at torch's own count a race in the fast paths'
    caches is what it finds."""
    before = torch.get_num_threads()
    torch.set_num_threads(os.cpu_count() or 1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("family", list(MODELS))
def test_eight_threads_first_calling_a_fresh_model_get_one_threads_answers(tmp_path, family, own_threads):
    path = saved(tmp_path, family, MODELS[family])
    torch.manual_seed(1)
    inputs = [torch.rand(1, 1, 28, 28), torch.rand(4, 1, 28, 28)]  # batch 1 packs weights, a batch does not
    alone, _ = ckpt.load_checkpoint(path)
    with torch.no_grad():
        expected = [[alone(x).scores for x in inputs] for _ in range(2)]  # first and later calls
    for _ in range(20):
        model, _ = ckpt.load_checkpoint(path)  # fresh: every lazy cache empty
        wrong = first_calls_at_once(model, inputs, expected)
        assert not wrong, wrong


def test_the_model_cache_loads_each_model_once_for_sessions_arriving_together(tmp_path):
    path = saved(tmp_path, "m", MODELS["capsnet"])
    cache = ModelCache(log=False)
    barrier = threading.Barrier(THREADS)
    got = []

    def get():
        barrier.wait()
        got.append(cache.get(path)[0])

    threads = [threading.Thread(target=get) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert cache.loads == 1 and all(m is got[0] for m in got)


def test_a_class_on_many_models_does_not_reload_them_in_a_loop(tmp_path):
    """Five models in use plus the robustness page's three: a count limit of four reloaded them
    on every turn; a memory budget that holds them loads each once."""
    paths = [saved(tmp_path, f"m{k}", MODELS["capsnet"]) for k in range(8)]
    cache = ModelCache(log=False)
    for _ in range(5):
        for p in paths:
            cache.get(p)
    assert cache.loads == 8 and cache.evictions == 0


def test_past_its_budget_the_cache_lets_the_least_recently_used_model_go(tmp_path):
    a, b, c = (saved(tmp_path, n, MODELS["capsnet"]) for n in "abc")
    size = footprint(ckpt.load_checkpoint(a)[0])
    cache = ModelCache(budget=2 * size, log=False)
    cache.get(a), cache.get(b), cache.get(a), cache.get(c)  # b is the least recently used
    assert cache.held() == ["a.safetensors", "c.safetensors"] and cache.evictions == 1
    cache.get(a)
    assert cache.loads == 3
    # a model bigger than the whole budget is still served (and kept alone)
    tiny = ModelCache(budget=1, log=False)
    tiny.get(a)
    tiny.get(b)
    assert tiny.held() == ["b.safetensors"]


def test_a_rewritten_file_is_loaded_anew_and_its_old_version_let_go(tmp_path):
    path = saved(tmp_path, "m", MODELS["capsnet"])
    cache = ModelCache(log=False)
    first = cache.get(path)[0]
    time.sleep(0.01)
    torch.manual_seed(5)
    ckpt.save_checkpoint(path, build_model(MODELS["capsnet"]), {"dataset": "mnist"})
    second = cache.get(path)[0]
    assert second is not first and cache.loads == 2 and cache.held() == ["m.safetensors"]


def test_the_kernels_switches_belong_to_the_thread_that_sets_them():
    seen = {}

    def other():
        seen["fast"], seen["compiled"] = policy.fast(), policy.compiled_em()

    with policy.reference_only():
        policy.compile_em(True)
        try:
            t = threading.Thread(target=other)
            t.start()
            t.join()
            assert not policy.fast()
        finally:
            policy.compile_em(False)
    assert seen == {"fast": True, "compiled": False}


@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("clang++") is None, reason="no C++ compiler")
def test_three_processes_starting_together_build_the_native_kernel_once(tmp_path):
    count = tmp_path / "compiles"
    cxx = tmp_path / "cxx"
    real = shutil.which("g++") or shutil.which("clang++")
    cxx.write_text(f'#!/bin/sh\necho run >> "{count}"\nexec "{real}" "$@"\n')
    cxx.chmod(0o755)
    env = {**os.environ, "CXX": str(cxx), "CAPSVIZ_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    env.pop("CAPSVIZ_NATIVE", None)
    script = textwrap.dedent(
        """
        from capsviz.kernels import native
        print(native.available(), native.reason())
        """
    )
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env) for _ in range(3)]
    outs = [p.communicate(timeout=600)[0].strip() for p in procs]
    assert outs == ["True None"] * 3, outs
    assert count.read_text().splitlines() == ["run"]
    assert len(list((tmp_path / "cache" / "native").glob("em_routing-*"))) == 1


def test_the_model_budget_is_the_machines_shared_by_its_app_processes(monkeypatch):
    from capsviz.model_cache import default_budget

    monkeypatch.setenv("CAPSVIZ_MODEL_MEMORY_MB", "2048")
    monkeypatch.delenv("CAPSVIZ_REPLICAS", raising=False)
    assert default_budget() == 2048 * 2**20
    monkeypatch.setenv("CAPSVIZ_REPLICAS", "8")
    assert default_budget() == 256 * 2**20  # eight replicas hold the machine's budget together, not eight times it
    monkeypatch.delenv("CAPSVIZ_MODEL_MEMORY_MB")
    alone = default_budget() * 8
    monkeypatch.setenv("CAPSVIZ_REPLICAS", "1")
    assert abs(default_budget() - alone) < 8
    monkeypatch.setenv("CAPSVIZ_REPLICAS", "nonsense")
    assert default_budget() == ModelCache(log=False).budget
