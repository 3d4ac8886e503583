"""End-to-end parity on texts (`modelship parity --texts FILE`): input sets of raw texts, tokenized on each side
the way that side really runs.

- Reference: transformers' own tokenizer (`AutoTokenizer` on the checkpoint's folder, `padding=True,
  truncation=True, max_length` as recorded), then eager PyTorch.
- Candidates: modelship's tokenizer (`preprocess.tokenizer` on the export's tokenizer.json), then the artifact; a served
  `NAME_pipeline` gets the texts themselves (its server tokenizes).

A set holds at most `SET_SIZE` texts, so a served pipeline answers each set in one request (each request is padded
to its own longest text, and per-token outputs must line up with the reference's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from modelship.contract.errors import UsageError
from modelship.contract.tensors import Tensors
from modelship.contract.tokenizer import TEXT_SIZE_HINT, TokenizerSpec, oversized_text
from modelship.parity.runner_protocol import BaseRunner, Runner, SetKind

TEXTS = SetKind.TEXTS.value  # the input-set key holding raw texts
SET_SIZE = 8
Tokenize = Callable[[list[str]], Tensors]


def read_text_file(path: Path) -> list[str]:
    """The texts of FILE, one per line (empty lines skipped); a UsageError naming the first line that is not UTF-8."""
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="surrogateescape").splitlines()
    except OSError as exc:
        raise UsageError(f"--texts {path}: cannot read ({exc.strerror or exc})") from None
    refuse_unsendable(lines, lambda number: f"--texts {path}: line {number}", "save it as UTF-8")
    texts = [line for line in lines if line.strip()]
    if not texts:
        raise UsageError(f"--texts {path}: no texts in the file", hint="one text per line")
    return texts


def refuse_unsendable(texts: Sequence[str], name: Callable[[int], str], hint: str) -> None:
    """A UsageError naming the first of `texts` that cannot be sent (`name(n)`: how the user knows text n, counted
    from 1): not UTF-8 (`hint` says how to fix that; its first undecodable byte is named), or over MAX_TEXT_BYTES.
    Python keeps the bytes it could not decode (in argv, or a file read with errors="surrogateescape") as lone
    surrogates, which no encoder accepts."""
    for number, text in enumerate(texts, 1):
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError as exc:
            code = ord(text[exc.start])
            what = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"lone surrogate U+{code:04X}"
            raise UsageError(f"{name(number)} is not UTF-8 ({what} at character {exc.start})", hint=hint) from None
        too_long = oversized_text(size, name(number))
        if too_long is not None:
            raise UsageError(too_long, hint=TEXT_SIZE_HINT)


def text_sets(texts: Sequence[str]) -> list[tuple[str, Tensors]]:
    """The first text alone, then every text in sets of up to SET_SIZE: (label, input set)."""
    sets = [("text 1 alone", {TEXTS: np.array(texts[:1], dtype=object)})]
    for start in range(0, len(texts), SET_SIZE):
        chunk = texts[start : start + SET_SIZE]
        sets.append((f"texts {start + 1}-{start + len(chunk)}", {TEXTS: np.array(chunk, dtype=object)}))
    return sets


class TextPipeline(BaseRunner):
    """A runner that tokenizes an input set of texts with `tokenize`, then runs `runner`; sets without texts go to
    `runner` as they are. Named like the runner it wraps; it takes a whole set at once (its padding is the set's)."""

    def __init__(self, runner: Runner, tokenize: Tokenize) -> None:
        self.runner = runner
        self.tokenize = tokenize
        self.name = runner.name

    def run(self, inputs: Tensors) -> Tensors:
        if TEXTS not in inputs:
            return self.runner.run(inputs)
        return self.runner.run(self.tokenize([str(t) for t in inputs[TEXTS]]))

    def close(self) -> None:
        self.runner.close()


def transformers_tokenize(folder: Path, spec: TokenizerSpec) -> Tokenize:
    """Reference side: transformers' AutoTokenizer from the checkpoint's folder (local files only)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)

    def tokenize(texts: list[str]) -> Tensors:
        encoded = tokenizer(texts, padding=True, truncation=True, max_length=spec.max_length, return_tensors="np")
        return {name: np.asarray(encoded[name], dtype=np.int64) for name in spec.inputs}

    return tokenize


def modelship_tokenize(path: Path, spec: TokenizerSpec) -> Tokenize:
    """Candidate side: modelship's tokenizer on the export's tokenizer.json."""
    from modelship.preprocess.tokenizer import TextTokenizer

    tokenizer = TextTokenizer(path, spec)
    return lambda texts: tokenizer.encode(texts)
