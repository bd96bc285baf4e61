"""Small CapsNets written the way public PyTorch code writes them, one convention at a time (the
ones capsviz's importer must reproduce): `Original(convention=...)`. Used by
tests/test_import_faithful.py, also as `--against tests/capsule_conventions.py:Original`."""

import torch
import torch.nn as nn
import torch.nn.functional as F

CONVENTIONS = (
    "paper",  # K channels at one position, (type, row, col) numbering: what the importer assumes
    "view",  # one conv, output.view(B, -1, 8): a capsule is 8 neighbours along one channel's map
    "stack",  # 8 convs stacked on dim 1, viewed (B, I, 8)
    "type-convs",  # T convs of K channels, one per capsule type (a list of 32 convs of 8 in the paper's size)
    "softmax-inputs",  # F.softmax(b) on (B, I, J): couplings sum to 1 over the input capsules
    "batch-logits",  # b (1, I, J) += the batch's mean agreement
    "batch-sum-logits",  # b (1, I, J) += the agreement summed over the batch
    "prior",  # a learned routing prior b (1, I, J)
    "unused-prior",  # a logit tensor b (1, I, J) kept as a parameter, the routing starting from zeros all the same
    "four-iterations",  # "3 iterations" in code that routes 4 times
    "squash-map",  # primary capsules squashed over dim 1: each value's whole map
    "squash-classes",  # class capsules squashed over dim 1 of (B, J, D): each value over the classes
    "squash-values",  # s kept (B, J, D, 1) and squashed over its last dim: each value on its own
    "normalised",  # inputs normalised with MNIST's mean and std inside forward
    "w-3d",  # W stored (I, K, J*D)
    "stages",  # the paper's computation, its stages given by capsviz_stages(x)
    "decoder-winner",  # the decoder fed the longest capsule's D values alone: Linear(D, h1)
    # gram-ai/capsule-networks' layout: K convs of T channels concatenated on the last axis, W (J, I, K, D),
    # the routing starting from a learned b (J, 1, I, 1, 1), a softmax over the inputs, the winner decoded
    "gram-ai",
)
# Written as public code writes them, and not what capsviz's twin computes: refused in one line
REFUSED = ("decoder-unmasked",)  # the decoder fed all J x D class-capsule values, none masked

C1, T, K, J, D, G = 8, 4, 8, 10, 16, 6  # Conv1 channels, capsule types, dims; classes, dims; grid (28 -> 20 -> 6)
I = G * G * T
# Weights larger than PyTorch's default start, as training makes them: capsules of every length
# (primary ones mostly 0.5-0.9, class capsules 0.1-0.9), so that every option changes the numbers
SCALE_CONV, SCALE_W = 4.0, 0.3


def squash(s, dim=-1):
    n2 = (s * s).sum(dim, keepdim=True)
    return n2 / (1 + n2) * s / torch.sqrt(n2 + 1e-12)


class Primary(nn.Module):
    def __init__(self, convention):
        super().__init__()
        self.convention = convention
        if convention == "stack":
            self.convs = nn.ModuleList(nn.Conv2d(C1, T, 9, stride=2) for _ in range(K))
        elif convention == "gram-ai":
            self.capsules = nn.ModuleList([nn.Conv2d(C1, T, 9, stride=2, padding=0) for _ in range(K)])
        elif convention == "type-convs":
            self.capsules = nn.ModuleList([nn.Conv2d(C1, K, 9, stride=2) for _ in range(T)])
        else:
            self.conv = nn.Conv2d(C1, T * K, 9, stride=2)

    def forward(self, h):
        B = h.shape[0]
        if self.convention == "stack":
            u = torch.stack([c(h) for c in self.convs], dim=1).view(B, I, -1)  # (B, K, T, G, G) viewed
        elif self.convention == "gram-ai":
            u = torch.cat([cap(h).view(B, -1, 1) for cap in self.capsules], dim=-1)  # (B, I, K), i = (type, row, col)
        elif self.convention == "type-convs":
            u = torch.stack([cap(h) for cap in self.capsules], dim=1)  # (B, T, K, G, G)
            u = u.permute(0, 1, 3, 4, 2).reshape(B, I, K)  # i = (type, row, col)
        elif self.convention in ("view", "squash-map"):
            u = self.conv(h).view(B, -1, K)
        else:
            p = self.conv(h)  # (B, T*K, G, G)
            u = p.view(B, T, K, G, G).permute(0, 1, 3, 4, 2).reshape(B, I, K)  # i = (type, row, col)
        return squash(u, dim=1 if self.convention == "squash-map" else -1)


class Digits(nn.Module):
    def __init__(self, convention):
        super().__init__()
        self.convention = convention
        scale = SCALE_W * (10 if convention in ("softmax-inputs", "gram-ai") else 1)  # its s is a mean over inputs, not a sum
        if convention == "gram-ai":
            self.route_logits = nn.Parameter(0.5 * torch.randn(J, 1, I, 1, 1))
            self.route_weights = nn.Parameter(scale * torch.randn(J, I, K, D))
        elif convention == "w-3d":
            self.W = nn.Parameter(scale * torch.randn(I, K, J * D))
        else:
            self.W = nn.Parameter(scale * torch.randn(1, I, J, D, K))
        if convention in ("prior", "unused-prior"):
            self.b = nn.Parameter(0.5 * torch.randn(1, I, J))
        self.iterations = 4 if convention == "four-iterations" else 3

    def forward(self, u):
        B = u.shape[0]
        if self.convention == "gram-ai":
            return self.gram_ai(u)
        if self.convention == "w-3d":
            u_hat = (u.unsqueeze(2) @ self.W).view(B, I, J, D)  # (B, I, J, D)
        else:
            u_hat = (self.W @ u[:, :, None, :, None]).squeeze(-1)  # (B, I, J, D)
        self.u_hat = u_hat  # kept for plotting, as public code does
        shared = self.convention in ("batch-logits", "batch-sum-logits")
        b = torch.zeros(1 if shared else B, I, J)
        if self.convention == "prior":
            b = b + self.b
        for t in range(self.iterations):
            c = F.softmax(b, dim=1 if self.convention == "softmax-inputs" else 2)
            s = (c.unsqueeze(-1) * u_hat).sum(1)  # (B, J, D)
            if self.convention == "squash-values":
                v = squash(s.unsqueeze(-1), dim=-1).squeeze(-1)  # (B, J, D, 1), as code keeping matmul's last axis has it
            else:
                v = squash(s, dim=1 if self.convention == "squash-classes" else -1)  # (B, J, D)
            if t < self.iterations - 1:
                a = (u_hat * v.unsqueeze(1)).sum(-1)  # (B, I, J)
                if shared:
                    a = a.sum(0, keepdim=True) if self.convention == "batch-sum-logits" else a.mean(0, keepdim=True)
                b = b + a
        self.c_ij = c
        return v

    def gram_ai(self, x):
        """As gram-ai/capsule-networks routes: priors (J, B, I, 1, D), logits from the learned b."""
        B = x.shape[0]
        priors = x[None, :, :, None, :] @ self.route_weights[:, None, :, :, :]  # (J, B, I, 1, D)
        self.u_hat = priors.view(J, B, I, D).permute(1, 2, 0, 3)  # (B, I, J, D), kept for plotting
        logits = self.route_logits
        for i in range(self.iterations):
            probs = F.softmax(logits, dim=2)  # over the input capsules
            outputs = squash((probs * priors).sum(dim=2, keepdim=True))  # (J, B, 1, 1, D)
            if i != self.iterations - 1:
                logits = logits + (priors * outputs).sum(dim=-1, keepdim=True)  # (J, B, I, 1, 1)
        self.c_ij = probs.view(J, -1, I).permute(1, 2, 0)  # (B, I, J)
        return outputs.view(J, B, D).transpose(0, 1)  # (B, J, D)


class Original(nn.Module):
    def __init__(self, convention="paper"):
        super().__init__()
        self.convention = convention
        self.conv1 = nn.Conv2d(1, C1, 9)
        self.primary = Primary(convention)
        self.digits = Digits(convention)
        width = D if convention in ("decoder-winner", "gram-ai") else J * D
        self.decoder = nn.Sequential(nn.Linear(width, 32), nn.ReLU(), nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 784), nn.Sigmoid())
        with torch.no_grad():
            for m in self.primary.modules():
                if isinstance(m, nn.Conv2d):
                    m.weight *= SCALE_CONV

    def forward(self, x):
        if self.convention == "normalised":
            x = (x - 0.1307) / 0.3081
        u = self.primary(F.relu(self.conv1(x)))
        v = self.digits(u)
        winner = v.norm(dim=-1).argmax(1)  # (B,)
        if self.convention in ("decoder-winner", "gram-ai"):
            return v, self.decoder(v[torch.arange(v.shape[0]), winner])  # (B, D) in
        if self.convention == "decoder-unmasked":
            return v, self.decoder(v.flatten(1))
        mask = F.one_hot(winner, J).float()
        return v, self.decoder((v * mask.unsqueeze(-1)).flatten(1))

    def capsviz_stages(self, x):
        if self.convention != "stages":
            return {}
        h = F.relu(self.conv1(x))
        u = self.primary(h)
        v, rec = self(x)
        return {
            "conv1": h,
            "primary": u,
            "u_hat": self.digits.u_hat,
            "couplings": self.digits.c_ij,
            "class_capsules": v,
            "reconstruction": rec,
        }


def make(convention="paper", seed=0):
    """A factory, as --against accepts: the network with seeded weights."""
    torch.manual_seed(seed)
    return Original(convention)


def trained(convention="paper", normalise=(0.0, 1.0), steps=30, seed=0):
    """The network trained `steps` steps (about a second) on the training images normalised as the
    user's data loader does, (x - mean) / std outside its forward: its lengths then fit the labels
    far better on that scale than on any other, as a fully trained network's do."""
    from capsviz.data import batches, load_split
    from capsviz.losses import margin_loss

    net = make(convention, seed)
    opt = torch.optim.Adam(net.parameters(), 3e-3)
    mean, std = normalise
    for x, y, _ in batches("mnist", load_split("mnist", "train"), 16, train=True, limit=16 * steps):
        loss = margin_loss(net((x - mean) / std)[0].norm(dim=-1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return net.eval()
