"""Issue 52: `capsviz import --against` checks the whole pipeline the user's evaluation runs (their
input pipeline, their routing batch), from any layout public code writes (a network split over
files, PrimaryCaps as T convs of K channels, a decoder fed the winning capsule alone, a per-value
class squash); a twin is "checked" only where that whole pipeline was compared within 1e-4."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from capsule_conventions import REFUSED, I, K, T, make

from capsviz import checkpoint as ckpt
from capsviz.adapter import CapsuleAdapter, import_file
from capsviz.errors import CapsvizError

ROOT = Path(__file__).resolve().parents[1]
CONVENTIONS_FILE = ROOT / "tests" / "capsule_conventions.py"


def test_a_network_split_over_two_files_imports_through_the_console_script(synthetic_data, tmp_path):
    """As pip installs it, the `capsviz` script's folder is sys.path[0]: neither the user's folder nor
    the current one is on the path unless --against FILE.py puts them there, as `python FILE.py` would."""
    code = tmp_path / "code"
    code.mkdir()
    shutil.copy(CONVENTIONS_FILE, code / "capsules.py")
    (code / "net.py").write_text("from capsules import make\n\n\ndef build():\n    return make('paper')\n")
    sys.path.insert(0, str(code))
    try:
        from capsules import make
    finally:
        sys.path.remove(str(code))
        sys.modules.pop("capsules", None)
    torch.save(make("paper").state_dict(), tmp_path / "w.pt")
    script = tmp_path / "bin" / "capsviz"
    script.parent.mkdir()
    script.write_text(
        f"#!{sys.executable}\nimport sys\nfrom capsviz.cli import entry\n\nif __name__ == '__main__':\n    sys.exit(entry())\n"
    )
    script.chmod(0o755)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    args = [str(script), "import", str(tmp_path / "w.pt"), "--out", str(tmp_path / "w.safetensors"), "--no-evaluate"]
    r = subprocess.run(
        [*args, "--against", f"{code / 'net.py'}:build"], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout)["check"].startswith("checked against its code")
    assert ckpt.read_meta(tmp_path / "w.safetensors").raw["imported"]["checked"]["against"].endswith("net.py:build")


def saved(tmp_path, convention):
    net = make(convention).eval()
    torch.save(net.state_dict(), tmp_path / f"{convention}.pt")
    return net, tmp_path / f"{convention}.pt"


def test_primary_caps_as_T_convs_of_K_channels_are_T_types_of_K_dims():
    """A list of T convs of K channels each (public code's `[Conv2d(256, 8, 9, 2) for _ in range(32)]`)
    is one capsule type per conv: I = G*G*T capsules, not the G*G*K of K convs of T channels."""
    adapter = CapsuleAdapter(dict(make("type-convs").state_dict()))
    assert (adapter.config().primary_types, adapter.config().primary_dim, adapter.get_parts().W.shape[0]) == (T, K, I)
    assert any(f"{T} convs of {K} channels, read as {T} types of {K} dims" in n for n in adapter.notes)


def test_a_decoder_fed_every_class_capsule_unmasked_is_refused_naming_its_layer(synthetic_data, tmp_path):
    (bad,) = REFUSED
    _, path = saved(tmp_path, bad)
    with pytest.raises(CapsvizError) as e:
        import_file(path, tmp_path / "u.safetensors", against=f"{CONVENTIONS_FILE}:make", against_args={"convention": bad}, evaluate=False)
    words = str(e.value)
    assert words.startswith("not imported: your decoder (decoder.0.weight, module decoder.5) is fed all 10 x 16 class-capsule")
    assert "unmasked" in words and "\n" not in words
    assert not (tmp_path / "u.safetensors").exists()
