"""Checkpoints: safetensors weights with everything needed to rebuild and judge the model in
their metadata, and the training state a run keeps beside them. Loading never executes code;
every way a file can be wrong is a CapsvizError.

One concern per module: `files` (one checkpoint written, read, checked and listed, and what its
record says of its training), `names` (the shipped models and the names a person may give one)
and `runs` (where a run writes, the weights and training state saved as one unit, the writer's
lock and the room a save needs). Everything else reads them as `capsviz.checkpoint.NAME`, from here.
"""

from __future__ import annotations

from capsviz.checkpoint.files import (
    FLOAT_STORAGE,
    MAX_HEADER_BYTES,
    META_KEY,
    lineage,
    list_checkpoints,
    load_checkpoint,
    read_meta,
    save_checkpoint,
    saving,
    total_training,
    training_labels,
    weights_digest,
)
from capsviz.checkpoint.names import (
    MAX_NAME,
    SHIPPED,
    is_shipped,
    model_stem,
    skeleton,
)
from capsviz.checkpoint.runs import (
    WritePlan,
    check_room,
    describe,
    latest_save,
    load_train_state,
    pair_bytes,
    pending_path,
    plan_write,
    promote,
    recover,
    save_run,
    train_state_path,
    writer_lock,
)

__all__ = [
    "META_KEY",
    "MAX_HEADER_BYTES",
    "weights_digest",
    "save_checkpoint",
    "saving",
    "read_meta",
    "load_checkpoint",
    "FLOAT_STORAGE",
    "lineage",
    "total_training",
    "training_labels",
    "list_checkpoints",
    "SHIPPED",
    "is_shipped",
    "MAX_NAME",
    "skeleton",
    "model_stem",
    "pending_path",
    "latest_save",
    "WritePlan",
    "plan_write",
    "describe",
    "promote",
    "train_state_path",
    "save_run",
    "recover",
    "load_train_state",
    "writer_lock",
    "check_room",
    "pair_bytes",
]
