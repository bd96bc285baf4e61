"""capsviz: watch capsule routing happen (Sabour et al. 2017; Hinton et al. 2018)."""

import os

# Back PyTorch's large CPU buffers (>= 2 MB) with transparent huge pages. A training step
# allocates and frees hundreds of MB (im2col patches, routing chunks); with 4 KB pages every
# step pays ~100k page faults again. Read by PyTorch at its first large allocation, so it only
# works when capsviz is imported before that; THP_MEM_ALLOC_ENABLE=0 opts out.
os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

__version__ = "0.1.0"
