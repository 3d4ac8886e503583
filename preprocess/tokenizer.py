"""Text -> a text model's inputs: one tokenizer implementation (Hugging Face's `tokenizers` on the folder's
`tokenizer.json`; no torch, no transformers) used by export verification, parity, `modelship infer` and the
server's `NAME_tokenize` model alike.

Each text is truncated to the spec's `max_length` tokens (special tokens included); a batch is padded on the right
with the spec's pad id to its longest text (or to `length`), its attention mask 0 there, as transformers' tokenizer
does with `padding=True, truncation=True, max_length=...`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from modelship.contract.errors import PreprocessError
from modelship.contract.tensors import Tensors
from modelship.contract.tokenizer import TEXT_SIZE_HINT, TokenizerSpec, oversized_text

if TYPE_CHECKING:  # imported when a tokenizer is read
    from tokenizers import Tokenizer

SENTENCES = Path(__file__).with_name("sentences.json")  # real sentences: accents, CJK, emoji, an empty one, a long one


class TextTokenizer:
    """The tokenizer of `path` (a tokenizer.json) run with `spec`'s truncation and padding."""

    def __init__(self, path: Path, spec: TokenizerSpec) -> None:
        tokenizer = _read_tokenizer(path)
        tokenizer.no_padding()  # padding is this class's: to the batch's longest text, or to `length`
        tokenizer.enable_truncation(spec.max_length)
        self.spec = spec
        self._tokenizer = tokenizer

    def encode(self, texts: Sequence[str], length: int | None = None) -> Tensors:
        """Model inputs (name -> int64 [len(texts), length or the longest]) for `texts`."""
        if not texts:
            raise PreprocessError("no text given", hint="pass at least one text")
        bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
        if bad is not None:
            raise PreprocessError(f"text {bad} is a {type(texts[bad]).__name__}, not a string")
        encodings = self._tokenizer.encode_batch(list(texts))
        longest = max(len(e.ids) for e in encodings)
        width = longest if length is None else length
        if width < longest:
            raise PreprocessError(f"padding length {width} is shorter than the longest text ({longest} tokens)")
        arrays = {
            "input_ids": np.full((len(texts), width), self.spec.pad_id, np.int64),
            "attention_mask": np.zeros((len(texts), width), np.int64),
            "token_type_ids": np.zeros((len(texts), width), np.int64),
        }
        for row, encoding in enumerate(encodings):
            size = len(encoding.ids)
            arrays["input_ids"][row, :size] = encoding.ids
            arrays["attention_mask"][row, :size] = encoding.attention_mask
            arrays["token_type_ids"][row, :size] = encoding.type_ids
        return {name: arrays[name] for name in self.spec.inputs}


def token_ids(path: Path) -> dict[str, int]:
    """Every token of the tokenizer.json at `path` (added tokens included) and the id it gives the model."""
    return _read_tokenizer(path).get_vocab(with_added_tokens=True)


def _read_tokenizer(path: Path) -> Tokenizer:
    """The `tokenizers.Tokenizer` of a tokenizer.json, or a PreprocessError naming the file."""
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception for unreadable or foreign JSON
        raise PreprocessError(
            f"{path}: not a tokenizers tokenizer ({str(exc).splitlines()[0][:160]})",
            hint="pass the folder written by save_pretrained with a fast tokenizer (its tokenizer.json)",
        ) from None


def decode_texts(values: Sequence[bytes | str]) -> list[str]:
    """Texts as they arrive in a request (Triton BYTES elements): UTF-8 decoded, a one-line error otherwise (not
    UTF-8, or over MAX_TEXT_BYTES: tokenized, it would hold the instance for minutes)."""
    texts = []
    for index, value in enumerate(values):
        too_long = oversized_text(len(value.encode("utf-8") if isinstance(value, str) else value), f"text {index}")
        if too_long is not None:
            raise PreprocessError(too_long, hint=TEXT_SIZE_HINT)
        if isinstance(value, str):
            texts.append(value)
            continue
        try:
            texts.append(bytes(value).decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise PreprocessError(
                f"text {index} is not UTF-8 ({exc.reason} at byte {exc.start})", hint="send texts encoded as UTF-8"
            ) from None
    return texts


def sentences() -> list[str]:
    """The built-in corpus of real sentences (export verification and the tokenizer tests use it)."""
    return list(json.loads(SENTENCES.read_text(encoding="utf-8")))
