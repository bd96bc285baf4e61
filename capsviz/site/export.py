"""The models as ONNX graphs for the static site, exported from the readable reference path.

A model becomes three small graphs that the browser chains, each the PyTorch code the app runs:
- `encoder`: image (1, C, S, S) -> feature maps, primary capsules u (1, I, K) and predictions
  u_hat (1, J, I, D); the feature maps (NHWC, for the tour) are a CapsNet's Conv1 after its ReLU and
  Efficient-CapsNet's last convolution after its ReLU, before its BatchNorm (as the app's tour shows);
- a routing graph: u_hat -> couplings and class capsules (`dynamic_graph` is shared by every model
  and the playground; Efficient-CapsNet also has its own self-attention graph with its learned prior);
- `decoder`: (B, D) capsule vectors placed in capsule slots (B,) -> reconstructions (B, C, S, S).

A matrix-capsule model (EM routing) becomes two: `votes`, image -> the class layer's votes (1, I, J, 16)
and lower activations (1, I), through Conv1, the primary capsules and both convolutional capsule
layers with their EM routing (`em_routing`, as the app's trace runs it); and `em`, those -> every
EM iteration's assignments R, activations a, mean poses mu and spreads sigma, from the readable
paper form (`em_procedure_1_steps`).

Everything runs under `policy.reference_only()`, so the graphs hold the papers' formulas (Conv2d,
einsum, Procedure 1), never a fast path. Weights that are exact in float16 (the shipped models are
stored so) are kept in float16 in the graph and cast to float32 in it: the browser computes with
the very float32 numbers PyTorch loads, in half the download.
"""

from __future__ import annotations

import contextlib
import copy
import io
import warnings

import torch
import torch.nn as nn
from torch.nn.utils import parametrize

from capsviz.analysis import why
from capsviz.families.capsnet.model import CapsNet
from capsviz.families.efficient_capsnet.model import EfficientCapsNet
from capsviz.families.matrix_capsnet.model import MatrixCapsNet
from capsviz.kernels import policy
from capsviz.layers import conv_out
from capsviz.routing import dynamic_routing_ji, efficient_squash, em_procedure_1_steps, em_routing, self_attention_routing
from capsviz.site.links import runs_in_site

ITERATIONS = 10  # the dynamic graph records this many; n iterations are its first n (Procedure 1 only looks back)
OPSET = 17
CHANGES_OPSET = 20  # the chapter's turn needs the affine grid operator (AffineGrid, opset 20), which onnxruntime-web runs


class _Float(nn.Module):
    """A float16 weight read as float32: the Cast the graph keeps."""

    def forward(self, w: torch.Tensor) -> torch.Tensor:
        return w.float()


def _half_weights(model: nn.Module) -> nn.Module:
    """A copy of `model` whose parameters exact in float16 are stored in float16 and cast on use."""
    model = copy.deepcopy(model)
    for module in list(model.modules()):
        for name, p in list(module.named_parameters(recurse=False)):
            half = p.detach().half()
            if torch.equal(half.float(), p.detach()):
                parametrize.register_parametrization(module, name, _Float(), unsafe=True)
                getattr(module.parametrizations, name).original = nn.Parameter(half, requires_grad=False)
    return model


class _Encoder(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor):
        m = self.model
        if isinstance(m, CapsNet):
            h = m.features(x)  # (1, S', S', C1)
            u = m.primary(h)  # (1, I, K)
            return h, u, m.digits(u)
        h, maps = x, None
        for layer in m.convs:
            h = torch.relu(h) if isinstance(layer, nn.ReLU) else layer(h)  # not in place: `maps` keeps the ReLU's output
            if isinstance(layer, nn.ReLU):
                maps = h  # (1, C, S', S'): the last one is kept
        p = m.primary(h)  # (1, C, 1, 1)
        u = efficient_squash(p.view(1, m.num_primary, m.config.primary_dim))  # (1, I, K): EfficientCapsNet.primary_capsules
        return maps.permute(0, 2, 3, 1), u, torch.einsum("jikd,bik->bjid", m.W, u)  # (1, S', S', C), u, (1, J, I, D)


class _Decoder(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, vectors: torch.Tensor, capsules: torch.Tensor) -> torch.Tensor:
        rec = self.model.decode(vectors, capsules)  # (B, S, S) or (B, C, S, S)
        return rec if rec.dim() == 4 else rec.unsqueeze(1)


class _Dynamic(nn.Module):
    """Procedure 1 with every iteration recorded: c (T, I, J), v (T, J, D), agreement added (T,)."""

    def forward(self, u_hat: torch.Tensor):
        r = dynamic_routing_ji(u_hat, ITERATIONS, record=True)
        return r.c[:, 0], r.v_trace[:, 0], r.b_change[:, 0]


class _Attention(nn.Module):
    """One pass of self-attention routing: c (I, J), logits a (I, J), v (J, D); with a model, its learned prior."""

    def __init__(self, model: EfficientCapsNet | None = None):
        super().__init__()
        self.model = model

    def forward(self, u_hat: torch.Tensor):
        prior = None if self.model is None else self.model.b
        r = self_attention_routing(u_hat, prior, squash=efficient_squash, record=True)
        return r.c[0, 0], r.b[0, 0], r.v[0]


def _conv_caps(layer, pose: torch.Tensor, a: torch.Tensor):
    """ConvCaps.forward's reference path (capsviz.layers) with its receptive fields gathered by the
    layer's own lower_index rather than unfolded (the exporter cannot write unfold here): the same
    slots in the same (ky, kx, t) order, the same votes, the same `em_routing`."""
    B, H, W, T, _ = pose.shape
    Ho, Wo = conv_out(H, layer.k, layer.s), conv_out(W, layer.k, layer.s)
    J = layer.W.shape[1]
    lower = layer.lower_index(H, W, T, pose.device)  # (P, I): the lower capsule in each slot
    p = pose.reshape(B, H * W * T, 4, 4)[:, lower]  # (B, P, I, 4, 4)
    a_p = a.reshape(B, H * W * T)[:, lower]  # (B, P, I)
    votes = torch.einsum("bpixy,ijyz->bpijxz", p, layer.W).flatten(-2)  # (B, P, I, J, 16)
    res = em_routing(
        votes, a_p, layer.iterations, layer.beta_u, layer.beta_a, final_lambda=layer.final_lambda, lower_index=lower, num_lower=H * W * T
    )
    return res.mu.view(B, Ho, Wo, J, 16), res.a.view(B, Ho, Wo, J)


class _Votes(nn.Module):
    """A matrix-capsule model up to its class layer's votes (1, I, J, 16) and lower activations a (1, I), as ClassCaps makes them."""

    def __init__(self, model: MatrixCapsNet):
        super().__init__()
        self.model = model

    def forward(self, x: torch.Tensor):
        m = self.model
        pose, a = m.primary(torch.relu(m.conv1(x)))
        pose, a = _conv_caps(m.convcaps1, pose, a)
        pose, a = _conv_caps(m.convcaps2, pose, a)
        c = m.classcaps
        B, H, W, T, _ = pose.shape
        votes = torch.einsum("bhwtxy,tjyz->bhwtjxz", pose.view(B, H, W, T, 4, 4), c.W).flatten(-2)  # (B, H, W, T, J, 16)
        if c.coords is not None:
            votes = votes + c.coords.view(H, W, 1, 1, 16)
        return votes.reshape(B, H * W * T, -1, 16), a.reshape(B, H * W * T)


class _EM(nn.Module):
    """The class layer's EM routing in the paper's form, every iteration kept: R (T, I, J), a (T, J), mu and sigma (T, J, 16)."""

    def __init__(self, model: MatrixCapsNet):
        super().__init__()
        self.layer = model.classcaps

    def forward(self, votes: torch.Tensor, a_in: torch.Tensor):
        c = self.layer
        steps = list(em_procedure_1_steps(votes[0], a_in[0], c.iterations, c.beta_u, c.beta_a, final_lambda=c.final_lambda))
        return tuple(torch.stack([s[k] for s in steps]) for k in range(4))


@contextlib.contextmanager
def _exportable():
    """Two shims for the legacy exporter, for the EM graphs alone: movedim with negative dims is
    written as a Transpose with negative indices (which onnxruntime refuses), so they are made
    positive; nothing is computed otherwise."""
    real = torch.Tensor.movedim

    def movedim(self, source, destination):
        n = self.dim()
        pos = lambda d: tuple(x % n for x in d) if isinstance(d, tuple | list) else d % n  # noqa: E731
        return real(self, pos(source), pos(destination))

    torch.Tensor.movedim = movedim
    try:
        yield
    finally:
        torch.Tensor.movedim = real


def _loose_branches(blob: bytes) -> bytes:
    """The graph with its If branches' declared output shapes dropped: the exporter declares a
    squeezed and an unsqueezed shape for the two sides of a squeeze it cannot size, which
    onnxruntime's shape inference refuses; it infers them itself."""
    import onnx

    model = onnx.load_from_string(blob)

    def loosen(graph):
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    for out in attr.g.output:
                        out.type.tensor_type.ClearField("shape")
                    del attr.g.value_info[:]
                    loosen(attr.g)

    del model.graph.value_info[:]
    loosen(model.graph)
    return model.SerializeToString()


def em_graphs(model: nn.Module) -> dict[str, bytes]:
    """{"votes", "em"} ONNX bytes for a matrix-capsule model (float32 in, float32 out)."""
    if not isinstance(model, MatrixCapsNet):
        raise ValueError(f"EM graphs are for matrix-capsule models, not {type(model).__name__}")
    model = model.eval()
    cfg = model.config
    x = torch.zeros(1, cfg.in_channels, cfg.in_size, cfg.in_size)
    with _exportable():
        votes = _loose_branches(_onnx(_Votes(model), (x,), ["image"], ["votes", "a"], {}))
        with torch.no_grad():
            v, a = _Votes(model)(x)
        em = _onnx(_EM(model), (v, a), ["votes", "a_in"], ["R", "a", "mu", "sigma"], {})
    return {"votes": votes, "em": em}


def _onnx(module: nn.Module, args: tuple, inputs: list[str], outputs: list[str], dynamic: dict, opset: int = OPSET) -> bytes:
    f = io.BytesIO()
    with policy.reference_only(), torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation and tracer notes
        torch.onnx.export(
            module.eval(),
            args,
            f,
            input_names=inputs,
            output_names=outputs,
            dynamic_axes=dynamic,
            opset_version=opset,
            do_constant_folding=False,  # folding would turn the float16 weights' casts into float32 copies
            dynamo=False,
        )
    return f.getvalue()


def supported(model: nn.Module) -> bool:
    """The site runs vector-capsule models with a decoder (CapsNets and Efficient-CapsNets) in its
    views, and matrix-capsule models in its EM routing view."""
    return runs_in_site(model.config) or isinstance(model, MatrixCapsNet)


def model_graphs(model: nn.Module) -> dict[str, bytes]:
    """{"encoder", "decoder"[, "attention"]} ONNX bytes for one model (float32 in, float32 out)."""
    if not runs_in_site(model.config):
        raise ValueError(f"the site runs CapsNets and Efficient-CapsNets with a decoder, not {type(model).__name__}")
    model = _half_weights(model.eval())
    cfg = model.config
    x = torch.zeros(1, cfg.in_channels, cfg.in_size, cfg.in_size)
    outs = ["features", "u", "u_hat"]
    D = cfg.digit_dim
    graphs = {
        "encoder": _onnx(_Encoder(model), (x,), ["image"], outs, {}),
        "decoder": _onnx(
            _Decoder(model),
            (torch.zeros(2, D), torch.zeros(2, dtype=torch.long)),
            ["vectors", "capsules"],
            ["reconstruction"],
            {"vectors": {0: "B"}, "capsules": {0: "B"}, "reconstruction": {0: "B"}},
        ),
    }
    if isinstance(model, EfficientCapsNet):
        u_hat = torch.zeros(1, cfg.num_classes, model.num_primary, D)
        graphs["attention"] = _onnx(_Attention(model), (u_hat,), ["u_hat"], ["c", "a", "v"], {})
    return graphs


def dynamic_graph() -> bytes:
    """Procedure 1 for any (1, J, I, D) predictions, ITERATIONS iterations recorded."""
    dims = {"u_hat": {1: "J", 2: "I", 3: "D"}, "c": {1: "I", 2: "J"}, "v": {1: "J", 2: "D"}}
    return _onnx(_Dynamic(), (torch.randn(1, 3, 6, 2),), ["u_hat"], ["c", "v", "agreement"], dims)


def attention_graph() -> bytes:
    """Self-attention routing without a prior, for any (1, J, I, D) predictions (the playground)."""
    dims = {"u_hat": {1: "J", 2: "I", 3: "D"}, "c": {0: "I", 1: "J"}, "a": {0: "I", 1: "J"}, "v": {0: "J", 1: "D"}}
    return _onnx(_Attention(), (torch.randn(1, 3, 6, 2),), ["u_hat"], ["c", "a", "v"], dims)


class _Changes(nn.Module):
    """The "Why capsules" chapter's changes of one digit (1, C, S, S), in order: each of why.SHIFTS and
    why.ANGLES (why.moved), then each of why.SCHEMES (why.scrambled) -> (V, C, S, S)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        moved = [why.moved(x, "shift", a) for a in why.SHIFTS] + [why.moved(x, "rotate", a) for a in why.ANGLES]
        return torch.cat([*moved, *(why.scrambled(x, s) for s in why.SCHEMES)])  # (V, C, S, S)


class _Baseline(nn.Module):
    """The chapter's baseline CNN as the chapter reads it: its pooled features (1, F), the last
    max-pool's output flattened, and its class scores as probabilities (1, J)."""

    def __init__(self, cnn: nn.Module):
        super().__init__()
        self.cnn = cnn

    def forward(self, x: torch.Tensor):
        f = self.cnn.features(x)  # (1, C, H', W')
        return f.flatten(1), self.cnn.head(f).softmax(-1)


def changes_graph(channels: int, size: int) -> bytes:
    """The chapter's changes of one (1, channels, size, size) digit: "changed" (V, channels, size, size)."""
    return _onnx(_Changes(), (torch.zeros(1, channels, size, size),), ["image"], ["changed"], {}, opset=CHANGES_OPSET)


def baseline_graph(cnn: nn.Module) -> bytes:
    """A baseline CNN's pooled features and class scores for one image."""
    cfg = cnn.config
    x = torch.zeros(1, cfg.in_channels, cfg.in_size, cfg.in_size)
    return _onnx(_Baseline(_half_weights(cnn.eval())), (x,), ["image"], ["features", "scores"], {})
