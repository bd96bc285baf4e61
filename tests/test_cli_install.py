"""`capsviz app` / `capsviz doctor` and the folders they use (capsviz/paths.py), without
installing anything (tests/e2e/test_install_browser.py installs into a fresh venv)."""

import subprocess
import sys
from pathlib import Path

import pytest
from test_app import app, router_mode  # noqa: F401  (fixtures)

from capsviz import cli, paths
from capsviz.kernels import native

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*argv: str, **env) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [sys.executable, "-m", "capsviz", *argv], capture_output=True, text=True, cwd=ROOT, env={**os.environ, **env}, timeout=300
    )


def test_doctor_prints_device_torch_kernel_data_and_folders(tmp_path):
    done = run_cli("doctor", CAPSVIZ_HOME=str(tmp_path), CAPSVIZ_NATIVE="0", CAPSVIZ_DATA_DIR=str(tmp_path / "none"))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    import torch

    assert f"torch: {torch.__version__}" in out and "device: cpu" in out
    assert "native EM kernel: off (turned off by CAPSVIZ_NATIVE=0)" in out  # why, not only that
    shipped = len(list((ROOT / "checkpoints").glob("*.safetensors")))
    assert f"checkpoints: {ROOT / 'checkpoints'} ({shipped} models)" in out  # a checkout shows its own folder
    assert f"user folder: {tmp_path}" in out and "data mnist:" in out


def test_doctor_says_why_the_kernel_is_off_when_it_cannot_be_built(tmp_path):
    done = run_cli("doctor", CXX=str(tmp_path / "no-compiler"), CAPSVIZ_CACHE=str(tmp_path))
    assert "native EM kernel: off (" in done.stdout and "no-compiler" in done.stdout


def test_other_commands_refuse_streamlit_options_in_one_line():
    done = run_cli("doctor", "--server.port", "8502")
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "error: python -m capsviz: unrecognized arguments: --server.port 8502"
    ]


def test_app_passes_streamlit_options_and_the_apps_settings(tmp_path, monkeypatch):
    monkeypatch.delenv("STREAMLIT_RUNNER_POST_SCRIPT_GC", raising=False)
    args, rest = cli.parser().parse_known_args(["app", "--checkpoints", str(tmp_path), "--server.address", "0.0.0.0", "--server.port=9000"])
    assert args.command == "app" and args.checkpoints == tmp_path
    command, env = cli.app_command(args.checkpoints, rest)
    assert command[1:5] == ["-m", "streamlit", "run", str(ROOT / "app.py")]
    assert command[5:] == ["--server.address", "0.0.0.0", "--server.port=9000"]
    assert env["CAPSVIZ_CHECKPOINTS"] == str(tmp_path)
    assert env["STREAMLIT_RUNNER_POST_SCRIPT_GC"] == "false"  # .streamlit/config.toml, read from any folder


def test_app_with_a_missing_checkpoint_folder_is_one_error_line(tmp_path):
    done = run_cli("app", "--checkpoints", str(tmp_path / "nope"))
    assert done.returncode == 2 and done.stderr.strip() == f"error: --checkpoints {tmp_path / 'nope'}: no such folder"


def test_installed_layout_uses_the_user_folder_seeded_once(tmp_path, monkeypatch):
    """As installed (no app.py beside capsviz/): the user folder, the shipped models copied in
    once, a deleted one not brought back, a trained one kept."""
    shipped = tmp_path / "pkg" / "_app" / "checkpoints"
    shipped.mkdir(parents=True)
    for name in ("a.safetensors", "b.safetensors"):
        (shipped / name).write_bytes(name.encode())
    monkeypatch.setattr(paths, "CHECKOUT", tmp_path / "site-packages")
    monkeypatch.setattr(paths, "PACKAGE", tmp_path / "pkg")
    monkeypatch.setenv("CAPSVIZ_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CAPSVIZ_CHECKPOINTS", raising=False)
    assert not paths.is_checkout() and paths.shipped_checkpoints() == shipped
    folder = paths.checkpoint_dir()
    assert folder == tmp_path / "home" / "checkpoints"
    assert paths.seed_user_checkpoints(folder) == ["a.safetensors", "b.safetensors"]
    assert (folder / "a.safetensors").read_bytes() == b"a.safetensors"
    (folder / "a.safetensors").unlink()
    (folder / "mine.safetensors").write_bytes(b"trained")
    assert paths.seed_user_checkpoints(folder) == []
    assert sorted(p.name for p in folder.glob("*.safetensors")) == ["b.safetensors", "mine.safetensors"]
    (shipped / "c.safetensors").write_bytes(b"c")  # a newer release ships one more
    assert paths.seed_user_checkpoints(folder) == ["c.safetensors"]


def test_after_pip_install_list_and_evaluate_find_the_shipped_models(tmp_path, monkeypatch, capsys):
    """Installed, before any `capsviz app`: the user folder is filled on first use by any command."""
    monkeypatch.setattr(paths, "CHECKOUT", tmp_path / "site-packages")
    monkeypatch.setattr(paths, "PACKAGE", tmp_path / "pkg")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "_app").symlink_to(ROOT)  # the shipped files where an install keeps them
    monkeypatch.setenv("CAPSVIZ_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CAPSVIZ_CHECKPOINTS", raising=False)
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert "capsnet-small-mnist.safetensors: CapsNet with dynamic routing on mnist" in out and "unusable" not in out
    assert (tmp_path / "home" / "checkpoints" / "capsnet-small-mnist.safetensors").is_file()
    assert cli.model_path(Path("capsnet-small-mnist")) == tmp_path / "home" / "checkpoints" / "capsnet-small-mnist.safetensors"


@pytest.mark.parametrize("platform, expected", [("linux", ".local/share/capsviz"), ("darwin", "Library/Application Support/capsviz")])
def test_user_folder_follows_the_platform(platform, expected, monkeypatch):
    monkeypatch.delenv("CAPSVIZ_HOME", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setattr(paths.sys, "platform", platform)
    assert paths.user_dir() == Path.home() / expected


def test_sidebar_says_when_and_why_the_native_kernel_is_off(app, monkeypatch):  # noqa: F811
    app.switch_page("pages/zoo.py").run()
    assert not app.exception
    if native.available():  # nothing to say while it is on
        assert not any("native EM kernel" in c.value for c in app.sidebar.caption)
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setattr(native, "_why", "g++ could not build it: error: something")
    app.run()
    line = next(c.value for c in app.sidebar.caption if c.value.startswith("device:"))
    assert line.endswith("· native EM kernel off: g++ could not build it: error: something")
