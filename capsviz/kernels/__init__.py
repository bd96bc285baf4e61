"""Every fast path in capsviz, behind one policy (`capsviz.kernels.policy`).

The capsule layers (capsviz.layers) and routing functions (capsviz.routing) compute the papers'
formulas in plain PyTorch; each asks `policy` once whether a faster path may run instead:

- conv.py, fourier.py, gemm.py: PrimaryCaps' (and Conv1's) convolution on the CPU, through the
  Fourier domain, as one im2col GEMM, or through a weight pre-packed by PyTorch's private ops.
- dynamic.py: DigitCaps' prediction GEMM and dynamic routing's hand-written backward.
- em.py, native/: EM routing by a C++ kernel, by ConvCaps' centred vote GEMM, or torch.compile'd.
- slices.py: CPU batches routed in cache-sized slices, and the sizes.

Every fast path is tested equal to the reference path in tests/test_kernels*.py.
"""

from capsviz.kernels import policy
from capsviz.kernels.policy import PathStatus, compile_em, paths, reference_only, why_off

__all__ = ["PathStatus", "compile_em", "paths", "policy", "reference_only", "why_off"]
