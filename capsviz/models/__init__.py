"""What every model family shares: the one output structure that training, analysis and pages use,
`build_model` (through the registry) and the vector-capsule heads (capsviz.models.heads).
Each family's own model lives in its folder (capsviz/families/NAME/model.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from capsviz.config import ModelConfig
from capsviz.registry import FAMILIES


@dataclass
class ModelOutput:
    """What every model's forward returns.

    scores: (B, J) class evidence in [0, 1]: capsule lengths (CapsNet), class activations
        (matrix capsules) or softmax / sigmoid probabilities (CNNs). Prediction = argmax.
    logits: (B, J) pre-softmax logits (CNNs only; the loss uses them).
    capsules: (B, J, 16) class capsule vectors (CapsNet, Efficient-CapsNet) or class poses (matrix capsules), else None.
    reconstruction: (B, H, W) decoder output, or None without a decoder or when not asked.
    trace: routing trace of the class layer (record=True): RoutingResult or EMRoutingResult.
    layer_traces: every routed layer's trace by name (record=True).
    """

    scores: torch.Tensor
    logits: torch.Tensor | None = None
    capsules: torch.Tensor | None = None
    reconstruction: torch.Tensor | None = None
    trace: object | None = None
    layer_traces: dict = field(default_factory=dict)


def build_model(config: ModelConfig) -> torch.nn.Module:
    """The model `config` describes: its family's model class (capsviz.registry.FAMILIES)."""
    entry = FAMILIES.get(getattr(config, "family", None))
    if entry is None or not isinstance(config, entry.config_class):
        raise TypeError(f"not a model config: {config!r}")
    return entry.build(config)


def count_parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
