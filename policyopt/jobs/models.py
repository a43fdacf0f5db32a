"""Small plain-torch models of the job zoo (no torchvision).

All models avoid batch-dependent layers (BatchNorm) and dropout, so an execution plan that splits
the global batch (data parallelism, gradient accumulation) computes the same gradient as one
process up to floating-point rounding, and gradient checkpointing recomputes identical activations.
Each model exposes ``gradient_checkpointing: bool``: when true, its repeated blocks run under
``torch.utils.checkpoint.checkpoint`` (activations are recomputed in the backward pass instead of
stored — less memory, about one extra forward of compute).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

__all__ = ["SmallResNet", "LSTMLanguageModel", "TinyGPT", "RecAutoencoder", "count_parameters"]


def count_parameters(model: nn.Module) -> int:
    """Number of trainable scalars ``Σ_p numel(p)``."""
    return int(sum(p.numel() for p in model.parameters() if p.requires_grad))


class _Checkpointable(nn.Module):
    gradient_checkpointing: bool = False

    def _run(self, block: nn.Module, *args: torch.Tensor) -> torch.Tensor:
        if self.gradient_checkpointing and self.training and torch.is_grad_enabled():
            return checkpoint(block, *args, use_reentrant=False)
        return block(*args)


class _ResidualBlock(nn.Module):
    """``y = relu(x' + GN(conv(relu(GN(conv(x))))))``; ``x'`` is a 1×1 strided projection when shapes change."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.norm1 = nn.GroupNorm(4, c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.norm2 = nn.GroupNorm(4, c_out)
        self.skip: nn.Module = (
            nn.Identity() if stride == 1 and c_in == c_out else nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.norm1(self.conv1(x)))
        return F.relu(self.skip(x) + self.norm2(self.conv2(h)))


class SmallResNet(_Checkpointable):
    """ResNet-style CNN for 8×8 single-channel images: stem, residual stages, global pool, linear."""

    def __init__(self, widths: tuple[int, ...] = (16, 32), blocks_per_stage: int = 2, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, widths[0], 3, padding=1, bias=False), nn.GroupNorm(4, widths[0]),
                                  nn.ReLU())
        blocks: list[nn.Module] = []
        c_in = widths[0]
        for stage, width in enumerate(widths):
            for b in range(blocks_per_stage):
                blocks.append(_ResidualBlock(c_in, width, stride=2 if (stage > 0 and b == 0) else 1))
                c_in = width
        self.blocks = nn.ModuleList(blocks)
        self.head = nn.Linear(c_in, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.stem(x)
        for block in self.blocks:
            h = self._run(block, h)
        return self.head(h.mean(dim=(2, 3)))


class LSTMLanguageModel(_Checkpointable):
    """Embedding → stacked LSTM → linear over the vocabulary (next-token logits)."""

    def __init__(self, vocab: int, embed: int = 64, hidden: int = 128, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.lstms = nn.ModuleList(nn.LSTM(embed if i == 0 else hidden, hidden, batch_first=True)
                                   for i in range(layers))
        self.head = nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)
        for lstm in self.lstms:
            h = self._run(_LSTMOutput(lstm), h)
        return self.head(h)


class _LSTMOutput(nn.Module):
    """Adapter returning only the output sequence of an ``nn.LSTM`` (for checkpointing)."""

    def __init__(self, lstm: nn.Module) -> None:
        super().__init__()
        self.lstm = lstm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lstm(x)[0]


class _GPTBlock(nn.Module):
    """Pre-LN transformer block: ``x + Attn(LN(x))`` then ``x + MLP(LN(x))`` with causal attention."""

    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        shape = (b, t, self.heads, d // self.heads)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class TinyGPT(_Checkpointable):
    """GPT-style decoder: token + learned position embeddings, causal blocks, final LN, linear head."""

    def __init__(self, vocab: int, seq_len: int, d_model: int = 64, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Parameter(torch.zeros(seq_len, d_model))
        nn.init.normal_(self.pos, std=0.02)
        self.blocks = nn.ModuleList(_GPTBlock(d_model, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.tok(tokens) + self.pos[: tokens.shape[1]]
        for block in self.blocks:
            h = self._run(block, h)
        return self.head(self.ln(h))


class RecAutoencoder(_Checkpointable):
    """Denoising autoencoder over item vectors: ``items → hidden → bottleneck → hidden → items`` (logits)."""

    def __init__(self, items: int, hidden: int = 256, bottleneck: int = 64) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(items, hidden), nn.SELU(), nn.Linear(hidden, bottleneck), nn.SELU())
        self.decoder = nn.Sequential(nn.Linear(bottleneck, hidden), nn.SELU(), nn.Linear(hidden, items))

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        return self._run(self.decoder, self._run(self.encoder, rows))
