"""Custom models of the zoo, loaded by export-model through their import path (`zoo.MODELS`:
`parity_tests.zoo_models:Name` here, `modelship.parity_tests.zoo_models:Name` from an installed modelship)."""

from __future__ import annotations

import math

import torch
from torch import nn


class MultiHead(nn.Module):
    """A small CNN with two heads, returning a dict: `logits` (classes) and a unit-norm `embedding`."""

    def __init__(self, num_classes: int = 10, width: int = 16, embedding: int = 32) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, width, 3, stride=2, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, stride=2, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(),
        )  # fmt: skip
        self.classifier = nn.Linear(2 * width, num_classes)
        self.projection = nn.Linear(2 * width, embedding)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        features = self.stem(x).mean(dim=(2, 3))
        embedding = self.projection(features)
        return {"logits": self.classifier(features), "embedding": nn.functional.normalize(embedding, dim=1)}


class Block(nn.Module):
    """Pre-norm self-attention + MLP; masked positions get no attention weight."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        batch, length, dim = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(batch, length, 3, self.heads, dim // self.heads).unbind(2)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(dim // self.heads)
        scores = scores.masked_fill(mask[:, None, None, :] == 0, -1e4)
        attended = torch.einsum("bhqk,bkhd->bqhd", scores.softmax(dim=-1), v).reshape(batch, length, dim)
        x = x + self.proj(attended)
        return x + self.mlp(self.norm2(x))


class TextEncoder(nn.Module):
    """A BERT-style encoder: int64 `input_ids` and `attention_mask` of any sequence length (up to `max_length`) ->
    (`hidden` (batch, sequence, dim), `pooled` (batch, dim), the mask-weighted mean of `hidden`)."""

    def __init__(
        self, vocab: int = 1000, dim: int = 64, heads: int = 4, layers: int = 2, max_length: int = 128
    ) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(max_length, dim)
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(layers)])
        self.norm = nn.LayerNorm(dim)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        positions = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.tokens(input_ids) + self.positions(positions)[None]
        for block in self.blocks:
            x = block(x, attention_mask)
        hidden = self.norm(x)
        weights = attention_mask.to(hidden.dtype)[..., None]
        return hidden, (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
