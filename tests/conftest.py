import os
import sys
from pathlib import Path

import pytest
import torch

# The app sets one torch thread per served process (capsviz.devices.serving_threads); the tests'
# AppTests run the app in this process, which keeps torch's own threads for the tests' training.
os.environ.setdefault("CAPSVIZ_TORCH_THREADS", "0")
# Test processes side by side (pytest-xdist's -n) share the cores between them.
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED_DATA = ROOT.parent / "shared" / "data"

from synthetic import write_mnist  # noqa: E402

from capsviz.config import preset  # noqa: E402
from capsviz.models import build_model  # noqa: E402


@pytest.fixture(scope="session")
def synthetic_root(tmp_path_factory) -> Path:
    """A data folder laid out like ../shared/data, with synthetic MNIST and Fashion-MNIST."""
    root = tmp_path_factory.mktemp("data")
    write_mnist(root / "mnist")
    write_mnist(root / "fashion-mnist")
    return root


@pytest.fixture
def synthetic_data(synthetic_root, monkeypatch, tmp_path):
    """CAPSVIZ_DATA_DIR -> synthetic data; cwd and cache moved away from real data."""
    monkeypatch.setenv("CAPSVIZ_DATA_DIR", str(synthetic_root))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return synthetic_root


@pytest.fixture
def real_data(monkeypatch):
    """The real datasets in ../shared/data: skipped where absent, required in CI."""
    if not (SHARED_DATA / "mnist").is_dir():
        if os.environ.get("CI"):
            pytest.fail(f"CI must have the real data at {SHARED_DATA}")
        pytest.skip("real data not present (../shared/data)")
    monkeypatch.setenv("CAPSVIZ_DATA_DIR", str(SHARED_DATA))
    return SHARED_DATA


@pytest.fixture(scope="module")
def capsnet():
    """A small untrained CapsNet (seeded), for analyses that need a real model of the family."""
    torch.manual_seed(0)
    return build_model(preset("capsnet-small", conv1_channels=16, primary_types=4)).eval()


@pytest.fixture(scope="module")
def matrix():
    """A small untrained matrix-capsule model (seeded)."""
    torch.manual_seed(0)
    return build_model(preset("matrix-small", in_size=28, num_classes=10, A=8, B=4, C=4, D=4)).eval()


@pytest.fixture(scope="session")
def postgres_server():
    """A PostgreSQL server for this test run (tests/classdb.py); skips with the reason where none
    can be started. CI installs Debian's postgresql and psycopg, so there it runs."""
    from classdb import Server

    server = Server()
    why = server.start()
    if why:
        server.stop()
        if os.environ.get("CLASS_DB_REQUIRED"):
            pytest.fail(f"CLASS_DB_REQUIRED=1 but {why}")
        pytest.skip(why)
    yield server
    server.stop()


@pytest.fixture(params=["sqlite", "postgresql"])
def class_db(request, monkeypatch):
    """The class store on each backend: SQLite in the model folder, or a fresh PostgreSQL
    database through CAPSVIZ_CLASS_DB (what several machines serving one class set)."""
    from capsviz import store

    if request.param == "postgresql":
        monkeypatch.setenv(store.URL_SETTING, request.getfixturevalue("postgres_server").database())
    else:
        monkeypatch.delenv(store.URL_SETTING, raising=False)
    return request.param
