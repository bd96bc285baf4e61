"""No platform traps: every capsviz module imports where Unix-only modules do not exist (Windows),
and the pieces that stand in for them behave."""

import subprocess
import sys

from capsviz import bench
from capsviz.kernels import native


def test_every_capsviz_module_imports_without_unix_only_modules():
    code = (
        "import sys, pkgutil, importlib\n"
        "for name in ('fcntl', 'resource', 'termios', 'pwd', 'grp'): sys.modules[name] = None  # import fails\n"
        "import capsviz\n"
        "names = [m.name for m in pkgutil.walk_packages(capsviz.__path__, 'capsviz.') if m.name != 'capsviz.__main__']\n"
        "for n in names: importlib.import_module(n)\n"
        "print(len(names))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) > 20  # the walk really found the package's modules


def test_peak_memory_is_a_number_without_proc():
    import torch

    assert bench._peak_mb(torch.device("cpu")) > 0


def test_the_native_library_is_named_for_the_platform():
    assert native.SUFFIX == {"win32": ".dll", "darwin": ".dylib"}.get(sys.platform, ".so")
