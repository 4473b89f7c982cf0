"""Whole networks, small, written from their papers and torchvision's structure (issue 38).

Each `Net` builds a module and an input: the architectures users bring (CNN families,
vision transformers, attention blocks, recurrent layers, a state-space scan), shrunk in
width and resolution so a CPU check takes seconds, but keeping every op of the original
(in-place activations, fused QKV `.split`, channel shuffles, squeeze-excite, windowed
attention, ...). `tests/nets/test_nets.py` checks them through `deplodock.compile` against
eager float64; `bench/net_times.py` times the same checks.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

import deplodock
from deplodock.frontend.expression import randomize_parameters


def _input(*shape: int, seed: int = 0) -> torch.Tensor:
    """A random (never zero) input, reproducible per net."""
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# --- MLP and classic CNNs -----------------------------------------------------------------


def mlp() -> nn.Module:
    """Three linear layers with in-place ReLU and dropout (inert in eval)."""
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(64, 48),
        nn.ReLU(inplace=True),
        nn.Dropout(0.1),
        nn.Linear(48, 32),
        nn.ReLU(inplace=True),
        nn.Linear(32, 10),
    )


class LeNet5(nn.Module):
    """LeCun et al. 1998: conv5-tanh-avgpool twice, then 120-84-10 (on 32x32 gray input)."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 6, 5),
            nn.Tanh(),
            nn.AvgPool2d(2),
            nn.Conv2d(6, 16, 5),
            nn.Tanh(),
            nn.AvgPool2d(2),
        )
        self.classifier = nn.Sequential(
            nn.Linear(16 * 5 * 5, 120), nn.Tanh(), nn.Linear(120, 84), nn.Tanh(), nn.Linear(84, 10)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


class AlexNet(nn.Module):
    """torchvision's AlexNet layout (11x11/4 stem, overlapping 3x3/2 max pools, adaptive
    average pool to 6x6, dropout-linear head) at 1/16 width on 63x63 input."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 4, 11, 4, 2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2),
            nn.Conv2d(4, 12, 5, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2),
            nn.Conv2d(12, 24, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(24, 16, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(16, 16, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(0.5),
            nn.Linear(16 * 6 * 6, 64),
            nn.ReLU(inplace=True),
            nn.Dropout(0.5),
            nn.Linear(64, 64),
            nn.ReLU(inplace=True),
            nn.Linear(64, classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


class VGG11(nn.Module):
    """VGG-11 (configuration A) with batch norm, at 1/16 width on 32x32 input."""

    CFG = (4, "M", 8, "M", 16, 16, "M", 32, 32, "M", 32, 32, "M")

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for v in self.CFG:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                assert isinstance(v, int)
                layers += [nn.Conv2d(cin, v, 3, padding=1), nn.BatchNorm2d(v), nn.ReLU(True)]
                cin = v
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.classifier = nn.Sequential(
            nn.Linear(32, 64), nn.ReLU(True), nn.Dropout(), nn.Linear(64, classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.avgpool(self.features(x)), 1))


# --- ResNet ------------------------------------------------------------------------------


class BasicBlock(nn.Module):
    """ResNet's basic block (torchvision layout: in-place ReLU, `out += identity`)."""

    expansion = 1

    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


class Bottleneck(nn.Module):
    """ResNet-50's bottleneck: 1x1 reduce, 3x3 (strided), 1x1 expand x4, projection."""

    expansion = 4

    def __init__(self, cin: int, width: int, stride: int = 1) -> None:
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        out += self.downsample(x)
        return self.relu(out)


class ResNet18(nn.Module):
    """ResNet-18 (2-2-2-2 basic blocks) in its CIFAR form: 3x3 stem, no max pool, 32x32
    input, widths 8-16-32-64."""

    def __init__(self, classes: int = 10, width: int = 8) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        stages: list[nn.Module] = []
        cin = width
        for i, cout in enumerate((width, 2 * width, 4 * width, 8 * width)):
            stride = 1 if i == 0 else 2
            stages.append(nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout)))
            cin = cout
        self.layers = nn.Sequential(*stages)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.relu(self.bn1(self.conv1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


# --- DenseNet, MobileNet, EfficientNet, ShuffleNet, GoogLeNet ---------------------------


class DenseBlock(nn.Module):
    """DenseNet-BC dense block (BN-ReLU-1x1-BN-ReLU-3x3 layers, each concatenated onto
    its input) followed by a transition (BN-ReLU-1x1, 2x2 average pool)."""

    def __init__(self, cin: int = 8, growth: int = 4, layers: int = 3) -> None:
        super().__init__()
        self.layers = nn.ModuleList()
        for i in range(layers):
            c = cin + i * growth
            self.layers.append(
                nn.Sequential(
                    nn.BatchNorm2d(c),
                    nn.ReLU(inplace=True),
                    nn.Conv2d(c, 4 * growth, 1, bias=False),
                    nn.BatchNorm2d(4 * growth),
                    nn.ReLU(inplace=True),
                    nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False),
                )
            )
        c = cin + layers * growth
        self.transition = nn.Sequential(
            nn.BatchNorm2d(c), nn.ReLU(inplace=True), nn.Conv2d(c, c // 2, 1, bias=False)
        )
        self.pool = nn.AvgPool2d(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = [x]
        for layer in self.layers:
            features.append(layer(torch.cat(features, 1)))
        return self.pool(self.transition(torch.cat(features, 1)))


def _conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1) -> list[nn.Module]:
    return [
        nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
        nn.BatchNorm2d(cout),
    ]


class MobileNetV1(nn.Module):
    """MobileNet v1: a strided 3x3 stem, then depthwise-separable blocks (3x3 depthwise,
    1x1 pointwise, BN-ReLU6 after each), global pool, linear."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        layers = [*_conv_bn(3, 8, 3, 2), nn.ReLU6(inplace=True)]
        cin = 8
        for cout, stride in ((16, 1), (32, 2), (32, 1), (64, 2)):
            layers += [*_conv_bn(cin, cin, 3, stride, groups=cin), nn.ReLU6(inplace=True)]
            layers += [*_conv_bn(cin, cout, 1), nn.ReLU6(inplace=True)]
            cin = cout
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(F.adaptive_avg_pool2d(self.features(x), 1).flatten(1))


class InvertedResidual(nn.Module):
    """MobileNet v2's inverted residual: 1x1 expand-ReLU6, 3x3 depthwise-ReLU6, linear 1x1
    projection, a residual when shapes match."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.residual = stride == 1 and cin == cout
        self.conv = nn.Sequential(
            *_conv_bn(cin, hidden, 1),
            nn.ReLU6(inplace=True),
            *_conv_bn(hidden, hidden, 3, stride, groups=hidden),
            nn.ReLU6(inplace=True),
            *_conv_bn(hidden, cout, 1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv(x) if self.residual else self.conv(x)


def mobilenet_v2() -> nn.Module:
    """A stem and three inverted residuals (one strided, one residual) of MobileNet v2."""
    return nn.Sequential(
        *_conv_bn(3, 8, 3, 2),
        nn.ReLU6(inplace=True),
        InvertedResidual(8, 8, 1, 1),
        InvertedResidual(8, 12, 2, 6),
        InvertedResidual(12, 12, 1, 6),
    )


class MBConv(nn.Module):
    """EfficientNet's MBConv: 1x1 expand-SiLU, depthwise 5x5-SiLU, squeeze-and-excite
    (global pool, reduce-SiLU, expand-sigmoid, scale), 1x1 project, residual."""

    def __init__(self, c: int = 8, expand: int = 4, k: int = 5) -> None:
        super().__init__()
        hidden = c * expand
        self.expand = nn.Sequential(*_conv_bn(c, hidden, 1), nn.SiLU(inplace=True))
        self.depthwise = nn.Sequential(*_conv_bn(hidden, hidden, k, groups=hidden), nn.SiLU())
        squeeze = max(1, c // 4)
        self.se_reduce = nn.Conv2d(hidden, squeeze, 1)
        self.se_expand = nn.Conv2d(squeeze, hidden, 1)
        self.project = nn.Sequential(*_conv_bn(hidden, c, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.depthwise(self.expand(x))
        s = F.adaptive_avg_pool2d(h, 1)
        s = torch.sigmoid(self.se_expand(F.silu(self.se_reduce(s))))
        return x + self.project(h * s)


def channel_shuffle(x: torch.Tensor, groups: int) -> torch.Tensor:
    """ShuffleNet's shuffle: (n, g, c/g, h, w) -> transpose -> flatten back."""
    n, c, h, w = x.shape
    x = x.view(n, groups, c // groups, h, w).transpose(1, 2).contiguous()
    return x.view(n, c, h, w)


class ShuffleUnit(nn.Module):
    """ShuffleNet v2's basic unit: `chunk` the channels in two, run one half through
    1x1-dw3x3-1x1, concatenate with the other half, shuffle."""

    def __init__(self, c: int = 16) -> None:
        super().__init__()
        half = c // 2
        self.branch = nn.Sequential(
            *_conv_bn(half, half, 1),
            nn.ReLU(inplace=True),
            *_conv_bn(half, half, 3, groups=half),
            *_conv_bn(half, half, 1),
            nn.ReLU(inplace=True),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = x.chunk(2, dim=1)
        return channel_shuffle(torch.cat((a, self.branch(b)), 1), 2)


class Inception(nn.Module):
    """GoogLeNet's inception module: 1x1, 1x1-3x3, 1x1-5x5 and 3x3 max pool-1x1 branches,
    concatenated along channels."""

    def __init__(self, cin: int = 16) -> None:
        super().__init__()

        def conv(ci: int, co: int, k: int) -> nn.Sequential:
            return nn.Sequential(*_conv_bn(ci, co, k), nn.ReLU(inplace=True))

        self.b1 = conv(cin, 8, 1)
        self.b2 = nn.Sequential(conv(cin, 6, 1), conv(6, 8, 3))
        self.b3 = nn.Sequential(conv(cin, 2, 1), conv(2, 4, 5))
        self.b4 = nn.Sequential(nn.MaxPool2d(3, 1, 1, ceil_mode=True), conv(cin, 4, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)


# --- Transformers -------------------------------------------------------------------------


class Attention(nn.Module):
    """Multi-head self-attention with one fused QKV projection split three ways (minGPT,
    ViT); `causal` masks the future."""

    def __init__(self, dim: int, heads: int, causal: bool = False) -> None:
        super().__init__()
        self.heads = heads
        self.causal = causal
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        if self.causal:
            mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
            att = att.masked_fill(~mask, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, d))


class Block(nn.Module):
    """Pre-norm transformer block (minGPT's `Block`, ViT's encoder block): LN-attention,
    LN-MLP (GELU), both residual."""

    def __init__(self, dim: int, heads: int, causal: bool = False) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, causal)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class ViT(nn.Module):
    """A small ViT: 4x4 patches by a strided conv, a class token, learned positions, two
    pre-norm blocks, the class token's LayerNorm to a linear head."""

    def __init__(self, image: int = 16, patch: int = 4, dim: int = 32, classes: int = 10) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, dim, patch, patch)
        n = (image // patch) ** 2
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.zeros(1, n + 1, dim))
        self.blocks = nn.Sequential(Block(dim, 4), Block(dim, 4))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


class SwinBlock(nn.Module):
    """A Swin Transformer block with a shifted window: `roll` by half a window, partition
    into windows (view/permute), windowed attention with a learned relative-position bias,
    merge the windows back, roll back; then the LN-MLP residual. (The shifted-window
    attention mask is left out: it is a constant added like the bias.)"""

    def __init__(self, dim: int = 16, heads: int = 2, window: int = 4, shift: int = 2) -> None:
        super().__init__()
        self.heads, self.window, self.shift = heads, window, shift
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.bias_table = nn.Parameter(torch.zeros((2 * window - 1) ** 2, heads))
        coords = torch.stack(
            torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")
        )
        coords = coords.flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (window - 1)
        self.register_buffer("bias_index", rel[..., 0] * (2 * window - 1) + rel[..., 1])
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def _attention(self, w: torch.Tensor) -> torch.Tensor:
        bw, n, d = w.shape
        qkv = self.qkv(w).reshape(bw, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        att = (q * (d // self.heads) ** -0.5) @ k.transpose(-2, -1)
        bias = self.bias_table[self.bias_index.view(-1)].view(n, n, -1).permute(2, 0, 1)
        att = F.softmax(att + bias.unsqueeze(0), dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(bw, n, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, h, w, c = x.shape
        s, ws = self.shift, self.window
        y = torch.roll(self.norm1(x), shifts=(-s, -s), dims=(1, 2))
        y = y.view(b, h // ws, ws, w // ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, c)
        y = self._attention(y)
        y = y.view(b, h // ws, w // ws, ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, c)
        x = x + torch.roll(y, shifts=(s, s), dims=(1, 2))
        return x + self.mlp(self.norm2(x))


class MinGPT(nn.Module):
    """minGPT: token and position embeddings, causal blocks with fused QKV `.split`, final
    LayerNorm, untied head."""

    def __init__(self, vocab: int = 64, dim: int = 32, heads: int = 4, t: int = 16) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(t, dim)
        self.block = Block(dim, heads, causal=True)
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(idx.shape[1])
        return self.head(self.ln(self.block(self.tok(idx) + self.pos(pos))))


class MultiheadAttention(nn.Module):
    """`nn.MultiheadAttention` used as self-attention with a causal mask."""

    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = x.shape[1]
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
        return self.mha(x, x, x, attn_mask=mask, need_weights=False)[0]


def transformer_encoder_layer() -> nn.Module:
    """`nn.TransformerEncoderLayer` (post-norm, ReLU, batch first): in eval its forward
    may take PyTorch's fused fast path."""
    return nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, batch_first=True)


# --- Recurrent and state-space ------------------------------------------------------------


class Mamba2Scan(nn.Module):
    """Mamba-2's SSD (state-space duality) in its chunked form, in plain PyTorch (after the
    paper's `ssd_minimal_discrete`): within each chunk the quadratic, masked "attention"
    form with decays from `segsum` (cumsum differences), across chunks a scan of the
    chunk-final states; input projection to x, B, C and dt, softplus, output gate."""

    def __init__(self, dim: int = 16, heads: int = 2, head_dim: int = 8, state: int = 8) -> None:
        super().__init__()
        self.h, self.p, self.n = heads, head_dim, state
        self.in_proj = nn.Linear(dim, heads * head_dim + 2 * state + heads)
        self.a_log = nn.Parameter(torch.zeros(heads))
        self.d = nn.Parameter(torch.ones(heads))
        self.out_proj = nn.Linear(heads * head_dim, dim)
        self.chunk = 4

    @staticmethod
    def segsum(x: torch.Tensor) -> torch.Tensor:
        """`out[..., i, j] = sum(x[..., j+1 : i+1])` below the diagonal, -inf above."""
        t = x.shape[-1]
        x = x[..., None].expand(*x.shape, t)
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool), -1)
        x = x.masked_fill(~mask, 0)
        out = torch.cumsum(x, dim=-2)
        return out.masked_fill(~torch.tril(torch.ones(t, t, dtype=torch.bool)), float("-inf"))

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        b, t, _ = u.shape
        h, p, n, c = self.h, self.p, self.n, self.chunk
        x, bm, cm, dt = self.in_proj(u).split([h * p, n, n, h], dim=-1)
        dt = F.softplus(dt)  # (b, t, h)
        a = -torch.exp(self.a_log) * dt  # (b, t, h): per-step log decay
        xs = (x.view(b, t, h, p) * dt[..., None]).view(b, t // c, c, h, p)
        bs = bm.view(b, t // c, c, n)
        cs = cm.view(b, t // c, c, n)
        a = a.view(b, t // c, c, h).permute(0, 3, 1, 2)  # (b, h, chunks, c)
        a_cum = torch.cumsum(a, dim=-1)
        # 1. within chunks: the quadratic form
        decay = torch.exp(self.segsum(a))  # (b, h, chunks, c, c)
        y_diag = torch.einsum("bzln,bzsn,bhzls,bzshp->bzlhp", cs, bs, decay, xs)
        # 2. each chunk's final state
        decay_states = torch.exp(a_cum[..., -1:] - a_cum)  # (b, h, chunks, c)
        states = torch.einsum("bzln,bhzl,bzlhp->bzhpn", bs, decay_states, xs)
        # 3. across chunks: scan the states (zero initial state)
        states = torch.cat([torch.zeros_like(states[:, :1]), states], dim=1)
        chunk_decay = torch.exp(self.segsum(F.pad(a_cum[..., -1], (1, 0))))  # (b, h, z+1, z+1)
        states = torch.einsum("bhzc,bchpn->bzhpn", chunk_decay, states)[:, :-1]
        # 4. states to outputs
        y_off = torch.einsum("bzln,bzhpn,bhzl->bzlhp", cs, states, torch.exp(a_cum))
        y = (y_diag + y_off).reshape(b, t, h, p) + x.view(b, t, h, p) * self.d[:, None]
        return self.out_proj(F.silu(y.reshape(b, t, h * p)))


class Recurrent(nn.Module):
    """`nn.LSTM`/`nn.GRU`/`nn.RNN`, 2 layers, bidirectional, batch first: outputs and the
    final states."""

    def __init__(self, kind: type[nn.RNNBase], dim: int = 8, hidden: int = 8) -> None:
        super().__init__()
        self.rnn = kind(dim, hidden, num_layers=2, bidirectional=True, batch_first=True)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out, state = self.rnn(x)
        return (out, *state) if isinstance(state, tuple) else (out, state)


# --- The registry ------------------------------------------------------------------------


@dataclass(frozen=True)
class Net:
    """One net to check: how to build it, its example input, whether it is slow to check
    (tens of seconds on 2 cores), why it fails where it does (`xfail`), or why it is not
    run at all (`skip`: it does not finish in a test's time)."""

    name: str
    build: Callable[[], nn.Module]
    example: Callable[[], torch.Tensor]
    slow: bool = False
    xfail: str | None = None
    skip: str | None = None


NETS: tuple[Net, ...] = (
    Net("mlp", mlp, lambda: _input(4, 1, 8, 8)),
    Net("lenet5", LeNet5, lambda: _input(2, 1, 32, 32)),
    Net("alexnet", AlexNet, lambda: _input(2, 3, 63, 63)),
    Net("vgg11", VGG11, lambda: _input(2, 3, 32, 32), slow=True),
    Net("resnet18", ResNet18, lambda: _input(2, 3, 32, 32), slow=True),
    Net("resnet_bottleneck", lambda: Bottleneck(16, 8, 2), lambda: _input(2, 16, 12, 12)),
    Net("densenet_block", DenseBlock, lambda: _input(2, 8, 8, 8)),
    Net("mobilenet_v1", MobileNetV1, lambda: _input(2, 3, 32, 32)),
    Net("mobilenet_v2_blocks", mobilenet_v2, lambda: _input(2, 3, 16, 16), slow=True),
    Net("efficientnet_mbconv", MBConv, lambda: _input(2, 8, 8, 8)),
    Net("shufflenet_unit", ShuffleUnit, lambda: _input(2, 16, 8, 8)),
    Net("inception_module", Inception, lambda: _input(2, 16, 8, 8)),
    Net("vit", ViT, lambda: _input(2, 3, 16, 16)),
    Net("swin_block", SwinBlock, lambda: _input(2, 8, 8, 16)),
    Net(
        "mingpt",
        MinGPT,
        lambda: torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(0)),
    ),
    Net("multihead_attention", MultiheadAttention, lambda: _input(2, 8, 32)),
    Net("transformer_encoder_layer", transformer_encoder_layer, lambda: _input(2, 8, 32)),
    Net("mamba2_chunked_scan", Mamba2Scan, lambda: _input(2, 16, 16)),
    Net("rnn_2layer_bidir", lambda: Recurrent(nn.RNN), lambda: _input(2, 6, 8), slow=True),
    Net("lstm_2layer_bidir", lambda: Recurrent(nn.LSTM), lambda: _input(2, 6, 8), slow=True),
    Net("gru_2layer_bidir", lambda: Recurrent(nn.GRU), lambda: _input(2, 6, 8), slow=True),
    # Issue 38's yardstick for the CPU path: a 2-layer LSTM over 64 steps.
    Net("lstm_64_steps", lambda: Recurrent(nn.LSTM), lambda: _input(2, 64, 8), slow=True),
)


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """max |actual - expected| / max |expected|: a float32 program against float64 eager."""
    return float((actual.double() - expected).abs().max() / expected.abs().max())


@dataclass(frozen=True)
class Check:
    """One net through `deplodock.compile` on the CPU: its largest relative error over the
    outputs, and the seconds spent compiling and running it."""

    error: float
    compile_s: float
    run_s: float


def check(net: Net, stage: str | None = None) -> Check:
    """Random weights and batch-norm statistics, `deplodock.compile(..., device="cpu")` (the
    default stage unless `stage`), one call, against the same module in float64 eager."""
    model = randomize_parameters(net.build(), seed=1).eval()
    x = net.example()
    start = time.perf_counter()
    compiled = deplodock.compile(model, (x,), stage=stage)
    compiled_at = time.perf_counter()
    actual = compiled(x)
    ran_at = time.perf_counter()
    reference = copy.deepcopy(model).double()  # `compiled` reads `model`'s parameters
    with torch.no_grad():
        expected = reference(x.double() if x.is_floating_point() else x)
    actual_t = actual if isinstance(actual, tuple) else (actual,)
    expected_t = expected if isinstance(expected, tuple) else (expected,)
    assert len(actual_t) == len(expected_t), (len(actual_t), len(expected_t))
    error = max(relative_error(a, e) for a, e in zip(actual_t, expected_t, strict=True))
    return Check(error, compiled_at - start, ran_at - compiled_at)
