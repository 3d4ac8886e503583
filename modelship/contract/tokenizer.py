"""TokenizerSpec: how text becomes a text model's inputs, as a typed, serialisable value.

The manifest stores `spec.to_dict()`; the tokenizer itself (`file`, Hugging Face's `tokenizer.json`) is copied into
the export beside it and run by `modelship.preprocess.tokenizer` (the `tokenizers` library: no torch, no transformers).
Texts are truncated to `max_length` tokens (special tokens included) and a batch is padded with `pad_id` to its
longest text, on the right; `inputs` are the tensors the model takes, in its forward order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelship.contract.errors import PreprocessError
from modelship.contract.json_object import JsonObject

TEXT_INPUTS = ("input_ids", "attention_mask", "token_type_ids")  # what a tokenizer gives a model, by name
TOKENIZER_FILE = "tokenizer.json"
# The most UTF-8 bytes one text may be, in a request or a verification file: a model reads only its first max_length
# tokens, and tokenizing megabytes it would never read holds a server's tokenize instance (and the client) for minutes.
MAX_TEXT_BYTES = 1 << 20
TEXT_SIZE_HINT = "send a shorter text: the model reads only its first max_length tokens"


def oversized_text(size: int, name: str) -> str | None:
    """Why a text of `size` UTF-8 bytes is neither sent nor tokenized (`name`: how the user knows it), or None."""
    if size <= MAX_TEXT_BYTES:
        return None
    return f"{name} is {size / (1 << 20):,.1f} MiB of UTF-8, over the {MAX_TEXT_BYTES >> 20} MiB a text may be"


@dataclass(frozen=True)
class TokenizerSpec:
    """The folder's tokenizer and the settings it is run with: `max_length` (truncation), `pad_id` and
    `pad_token` (padding), `inputs` (the model's text inputs, input_ids first)."""

    max_length: int
    pad_id: int
    pad_token: str
    inputs: tuple[str, ...] = ("input_ids", "attention_mask")
    file: str = TOKENIZER_FILE

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        if isinstance(self.max_length, bool) or not isinstance(self.max_length, int) or self.max_length < 2:
            raise PreprocessError(f"tokenizer max_length must be an int >= 2, got {self.max_length!r}")
        if isinstance(self.pad_id, bool) or not isinstance(self.pad_id, int) or self.pad_id < 0:
            raise PreprocessError(f"tokenizer pad_id must be a non-negative int, got {self.pad_id!r}")
        unknown = [name for name in self.inputs if name not in TEXT_INPUTS]
        if unknown or not self.inputs or self.inputs[0] != "input_ids":
            raise PreprocessError(
                f"tokenizer inputs {list(self.inputs)}: input_ids first, then any of {', '.join(TEXT_INPUTS[1:])}"
            )
        if not self.file or "/" in self.file or self.file.startswith("."):
            raise PreprocessError(f"tokenizer file must be a plain file name in the export, got {self.file!r}")

    def to_dict(self) -> JsonObject:
        return {
            "file": self.file,
            "max_length": self.max_length,
            "pad_id": self.pad_id,
            "pad_token": self.pad_token,
            "inputs": list(self.inputs),
        }

    @classmethod
    def from_dict(cls, data: Any) -> TokenizerSpec:
        if not isinstance(data, dict):
            raise PreprocessError(f"a tokenizer spec is a JSON object, got {type(data).__name__}")
        try:
            return cls(
                max_length=data["max_length"],
                pad_id=data["pad_id"],
                pad_token=str(data["pad_token"]),
                inputs=tuple(data.get("inputs", ("input_ids", "attention_mask"))),
                file=data.get("file", TOKENIZER_FILE),
            )
        except KeyError as exc:
            raise PreprocessError(f"tokenizer spec: missing field {exc.args[0]!r}") from None


@dataclass(frozen=True)
class TokenizerSource:
    """A checkpoint's tokenizer: its tokenizer.json (`path`) and the settings it is run with (`spec`)."""

    path: Path
    spec: TokenizerSpec
