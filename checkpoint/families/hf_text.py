"""Text models behind one tensor interface: a Hugging Face model built from its config.json by transformers' own
classes (never from a hub), wrapped so every format exports the same graph.

In: `input_ids`, `attention_mask` and, for models that use them, `token_type_ids`, each int64 [batch, sequence].
Out: `logits` ([batch, labels] for sequence classification, [batch, sequence, labels] per token) or `embedding`
([batch, dim]: the sentence-transformers folder's pooling over the real tokens, then its L2 normalisation, inside
the graph).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, cast

import torch
from torch import nn

from modelship.checkpoint.families.hf_folder import EMBEDDING_TASK, HFFolder, Pooling
from modelship.checkpoint.families.model_hooks import FusableAttention
from modelship.contract.errors import CheckpointError
from modelship.contract.iospec import BATCH, IOSpec, TensorSpec
from modelship.preprocess.tokenizer import token_ids

if TYPE_CHECKING:
    from transformers import PreTrainedModel

SEQUENCE = "sequence"


def text_io(folder: HFFolder, model: PreTrainedModel) -> IOSpec:
    """The wrapped model's inputs (output shapes are found by running it)."""
    config = model.config
    ranges = {
        "input_ids": (0, config.vocab_size),
        "attention_mask": (0, 2),  # the test-input generator's mask: real first token, random holes after
        "token_type_ids": (0, max(1, getattr(config, "type_vocab_size", 1))),
    }
    return IOSpec(tuple(TensorSpec(n, (BATCH, SEQUENCE), "int64", ranges[n]) for n in folder.inputs))


class TextTensors(nn.Module):
    """forward(input_ids, attention_mask) -> {"logits"} or {"embedding"}."""

    def __init__(self, model: PreTrainedModel, task: str, pooling: Pooling | None) -> None:
        super().__init__()
        self.model = model
        self.embedding = task == EMBEDDING_TASK
        self.pooling = pooling.mode if pooling else "none"
        self.normalize = bool(pooling and pooling.normalize)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        return self.answer(input_ids=input_ids, attention_mask=attention_mask)

    def answer(self, **inputs: torch.Tensor) -> dict[str, torch.Tensor]:
        result = self.model(**inputs)
        if not self.embedding:
            return {"logits": result.logits}
        return {"embedding": self.pool(result.last_hidden_state, inputs["attention_mask"])}

    def pool(self, states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        mask = attention_mask.unsqueeze(-1).to(states.dtype)
        if self.pooling == "cls":
            pooled = states[:, 0]
        elif self.pooling == "max":
            pooled = states.masked_fill(mask == 0, torch.finfo(states.dtype).min).amax(dim=1)
        else:
            pooled = (states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        return nn.functional.normalize(pooled, p=2.0, dim=1) if self.normalize else pooled

    def fusable_attention(self) -> FusableAttention | None:
        """(a model hook) The encoder's heads and width, and transformers' eager attention to export it with; None
        for a model whose config names neither."""
        config = self.model.config
        heads, width = getattr(config, "num_attention_heads", None), getattr(config, "hidden_size", None)
        if not (isinstance(heads, int) and isinstance(width, int)):
            return None
        return FusableAttention(heads, width, self._eager_attention)

    @contextlib.contextmanager
    def _eager_attention(self) -> Iterator[None]:
        previous = self.model.config._attn_implementation
        self.model.set_attn_implementation("eager")
        try:
            yield
        finally:
            self.model.set_attn_implementation(previous)


class TextTensorsWithTypes(TextTensors):
    """forward(input_ids, attention_mask, token_type_ids): for models that take segment ids (BERT)."""

    def forward(  # type: ignore[override]
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        return self.answer(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)


def wrap_text_model(model: PreTrainedModel, folder: HFFolder) -> TextTensors:
    """The model behind the tensor interface its tokenizer feeds; a CheckpointError when the folder's tokenizer
    or labels do not fit it."""
    _check_vocabulary(model, folder)
    _check_labels(model, folder)
    wrapper = TextTensorsWithTypes if "token_type_ids" in folder.inputs else TextTensors
    return wrapper(model, folder.task, folder.pooling).eval()


def _check_vocabulary(model: PreTrainedModel, folder: HFFolder) -> None:
    """Every id the tokenizer gives (its tokens and pad id) must have a row in the model's input embedding."""
    if folder.tokenizer is None or folder.tokenizer_spec is None:
        return
    rows = cast(nn.Embedding, model.get_input_embeddings()).num_embeddings
    spec = folder.tokenizer_spec
    given = {(index, token) for token, index in token_ids(folder.tokenizer).items()} | {(spec.pad_id, spec.pad_token)}
    beyond = sorted((index, token) for index, token in given if index >= rows)
    if not beyond:
        return
    examples = ", ".join(f"{token!r} {index}" for index, token in beyond[:3])
    vocab_size = getattr(model.config, "vocab_size", None)
    raise CheckpointError(
        f"{folder.tokenizer}: {len(beyond)} token ids {beyond[0][0]}..{beyond[-1][0]} (e.g. {examples}) are beyond "
        f"the model's {rows}-row input embedding" + (f" (config.json vocab_size {vocab_size})" if vocab_size else ""),
        hint="export with the tokenizer the model was trained with, or resize its embeddings "
        "(model.resize_token_embeddings(len(tokenizer))) and save both again",
    )


def _check_labels(model: PreTrainedModel, folder: HFFolder) -> None:
    """One label per output of the head (transformers sizes it by num_labels when config.json sets it)."""
    outputs = getattr(model.config, "num_labels", None)
    if folder.labels is None or outputs is None or len(folder.labels) == outputs:
        return
    raise CheckpointError(
        f"{folder.root / 'config.json'}: id2label has {len(folder.labels)} labels for a head of {outputs} outputs "
        f"(num_labels {outputs})",
        hint=f'give id2label one label per output, "0" to "{outputs - 1}", and drop num_labels',
    )
