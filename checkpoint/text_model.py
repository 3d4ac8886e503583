"""Text models behind one tensor interface: a Hugging Face model built from its config.json by transformers' own
classes (never from a hub), wrapped so every format exports the same graph.

In: `input_ids`, `attention_mask` and, for models that use them, `token_type_ids`, each int64 [batch, sequence].
Out: `logits` ([batch, labels] for sequence classification, [batch, sequence, labels] per token) or `embedding`
([batch, dim]: the sentence-transformers folder's pooling over the real tokens, then its L2 normalisation, inside
the graph).
"""

from __future__ import annotations

import torch
from torch import nn

from modelship.checkpoint.hf_folder import EMBEDDING_TASK, HFFolder, Pooling
from modelship.contract.errors import ArchitectureError
from modelship.contract.iospec import BATCH, IOSpec, TensorSpec

SEQUENCE = "sequence"


def build_text_model(folder: HFFolder) -> nn.Module:
    """The folder's transformers model with freshly initialised weights (eval mode), from its config alone."""
    import transformers

    transformers.logging.set_verbosity_error()  # its info lines (a loss it would use for training) are not ours
    cls = getattr(transformers, folder.architecture, None)
    if not (isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel)):
        raise ArchitectureError(
            f"{folder.architecture!r} is not a transformers model class (transformers {transformers.__version__})",
            hint="check config.json 'architectures' or --arch transformers/CLASS",
        )
    fields = {k: v for k, v in folder.config.items() if k not in ("architectures", "transformers_version")}
    try:
        config = transformers.AutoConfig.for_model(**fields)
        return cls(config).eval()
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ArchitectureError(
            f"could not build {folder.architecture} from {folder.root / 'config.json'}: {exc}",
            hint="check the config's model_type and sizes",
        ) from None


def text_io(folder: HFFolder, model: nn.Module) -> IOSpec:
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

    def __init__(self, model: nn.Module, task: str, pooling: Pooling | None) -> None:
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


class TextTensorsWithTypes(TextTensors):
    """forward(input_ids, attention_mask, token_type_ids): for models that take segment ids (BERT)."""

    def forward(  # type: ignore[override]
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> dict[str, torch.Tensor]:
        return self.answer(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)


def wrap_text_model(model: nn.Module, folder: HFFolder) -> TextTensors:
    """The model behind the tensor interface its tokenizer feeds."""
    wrapper = TextTensorsWithTypes if "token_type_ids" in folder.inputs else TextTensors
    return wrapper(model, folder.task, folder.pooling).eval()
