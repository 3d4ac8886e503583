"""Verification inputs for text models: real sentences (preprocess/sentences.json: accents, CJK, emoji, mixed
scripts, an empty text, one longer than any model's limit) run through the export's own tokenizer, so every artifact
is judged on token ids, masks and padding as clients will send them.

Sets: one per batch size (the corpus taken in turn: texts of different lengths, so a batch is padded), every text
at once (the long one truncated), and the largest batch again padded `PAD_EXTRA` tokens further: the model's
answers at real tokens must not change with the amount of padding (`check_padding`, on eager; every artifact is
then judged against eager on both paddings).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from modelship.contract.errors import ExportError
from modelship.contract.tensors import Tensors
from modelship.contract.tokenizer import TokenizerSource
from modelship.preprocess.tokenizer import TextTokenizer, sentences

PAD_EXTRA = 8
PADDING_ATOL = 1e-4  # float32 noise of attention over a longer (masked) sequence
PADDING_RTOL = 1e-3


@dataclass(frozen=True)
class TextSets:
    """Tokenised input sets with their labels; `padded` = (i, j): set j holds set i's texts with more padding."""

    inputs: list[Tensors]
    labels: list[str]
    padded: tuple[int, int]


def text_input_sets(source: TokenizerSource, batch_sizes: Sequence[int]) -> TextSets:
    tokenizer = TextTokenizer(source.path, source.spec)
    corpus = sentences()
    batches, start = [], 0
    for size in batch_sizes:
        batches.append([corpus[(start + i) % len(corpus)] for i in range(size)])
        start += size
    inputs = [tokenizer.encode(texts) for texts in batches]
    labels = [f"{len(texts)} texts" for texts in batches]
    inputs.append(tokenizer.encode(corpus))
    labels.append(f"all {len(corpus)} texts (the longest truncated to {source.spec.max_length} tokens)")
    base = int(np.argmax([s["input_ids"].size for s in inputs[:-1]]))
    longer = min(inputs[base]["input_ids"].shape[1] + PAD_EXTRA, source.spec.max_length)
    inputs.append(tokenizer.encode(batches[base], length=longer))
    labels.append(f"{labels[base]}, padded to {longer} tokens")
    return TextSets(inputs, labels, (base, len(inputs) - 1))


def stress_texts() -> list[str]:
    """Texts whose activations reach far past ordinary sentences' (long runs of numbers, one word or one character
    repeated, other scripts, emoji, URLs, code, base64): what a dynamically quantized model may meet beside a
    sentence in a server's batch."""
    return [
        " ".join(str(i * 7919 % 100003) for i in range(200)),
        " ".join(f"{i * 3.14159:.5f}" for i in range(120)),
        "the " * 300,
        "buffalo " * 300,
        "!" * 300,
        ("WARNING SYSTEM FAILURE IMMEDIATE ACTION REQUIRED " * 40).strip(),
        "ภาษาไทยเป็นภาษาที่มีระดับเสียงของคำแน่นอนหรือวรรณยุกต์เช่นเดียวกับภาษาจีน " * 10,
        "हिन्दी विश्व की एक प्रमुख भाषा है एवं भारत की राजभाषा है। " * 20,
        "日本語は主に日本国内や日本人同士の間で使用される言語である。" * 15,
        "🙂🚀📎🔥💯🎉😀😂🤖👍 " * 40,
        " ".join(f"https://example.com/path/{i}?q={i * 13}&id=abc{i}" for i in range(40)),
        "def f(x):\n    return [i**2 for i in range(x) if i % 3 == 0]\n" * 15,
    ]


def served_batchings(source: TokenizerSource) -> tuple[list[Tensors], list[str]]:
    """The export's sentences as a server may batch them with other users' requests: each alone, and all of them
    beside the stress texts (padded to the longest): a model whose answer for one row depends on its batchmates is
    judged on both."""
    tokenizer = TextTokenizer(source.path, source.spec)
    corpus = sentences()
    inputs = [tokenizer.encode([text]) for text in corpus]
    labels = [f"text {i + 1} alone" for i in range(len(corpus))]
    stress = stress_texts()
    inputs.append(tokenizer.encode([*corpus, *stress]))
    labels.append(f"all {len(corpus)} texts beside {len(stress)} extreme ones (numbers, repeats, scripts, code)")
    return inputs, labels


def check_padding(outputs: Sequence[Tensors], sets: TextSets) -> None:
    """ExportError unless the eager outputs on the two paddings of the same texts agree at every real token."""
    first, second = sets.padded
    mask = sets.inputs[first]["attention_mask"].astype(bool)
    for name, short in outputs[first].items():
        long = outputs[second][name]
        if short.ndim >= 2 and short.shape[1] == mask.shape[1]:  # per token: compare the real tokens
            short, long = short[mask], long[:, : mask.shape[1]][mask]
        if short.shape != long.shape or not np.allclose(short, long, atol=PADDING_ATOL, rtol=PADDING_RTOL):
            worst = float(np.abs(short - long).max()) if short.shape == long.shape else float("inf")
            raise ExportError(
                f"output {name!r} changes with padding ({sets.labels[first]} vs {sets.labels[second]}: max abs "
                f"{worst:.3g} at real tokens): the model does not apply its attention mask",
                hint="check that forward passes attention_mask to the model (and that pooling uses it)",
            )
