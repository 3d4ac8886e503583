"""What `modelship infer --text` asks a served text pipeline and how it shows the answer: a text classifier's top-k
classes, a token classifier's label per token, a sentence embedding's vector (and, for several texts, how similar
each pair is). Texts go to the `NAME_pipeline` as UTF-8 (its server tokenizes them), so the client needs no
tokenizer."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from modelship.contract.errors import ClientError
from modelship.contract.labels import label_for
from modelship.contract.tensors import Tensors
from modelship.parity.text_sets import read_text_file, refuse_unsendable
from modelship.serve.client import TritonClient
from modelship.serve.model_info import ModelInfo
from modelship.serve.text_pipeline import TEXT
from modelship.tasks import TASKS, Preprocessing
from modelship.tasks.classification import top_k
from modelship.tasks.text import SENTENCE_EMBEDDING, TEXT_CLASSIFICATION, TOKEN_CLASSIFICATION


@dataclass
class TextAnswers:
    """Per text: `top_k` (a classifier's), `labels` (a token classifier's, one per token position) or
    `embedding`; `similarity` between every pair of embeddings."""

    task: str
    texts: list[str]
    top_k: list[list[dict]] = field(default_factory=list)
    labels: list[list[str]] = field(default_factory=list)
    embeddings: list[list[float]] = field(default_factory=list)
    similarity: list[list[float]] = field(default_factory=list)

    def to_dict(self) -> dict:
        data: dict = {"task": self.task, "texts": self.texts}
        for key in ("top_k", "labels", "embeddings", "similarity"):
            if getattr(self, key):
                data[key] = getattr(self, key)
        return data


def read_texts(texts: tuple[str, ...], file: Path | None) -> list[str]:
    """--text values, then the lines of --texts FILE (parity's reader: one text per line, empty lines skipped); a
    UsageError for a text that is not UTF-8, before any request."""
    hint = "pass texts encoded as UTF-8, as a terminal under LANG=C.UTF-8 does"
    refuse_unsendable(texts, lambda number: f"--text {number}", hint)
    return list(texts) + (read_text_file(file) if file is not None else [])


def takes_texts(info: ModelInfo) -> bool:
    """Whether the served model is a text model (its task is fed by a tokenizer): a text pipeline, or the model
    behind one."""
    task = TASKS.get(info.task)
    return task is not None and task.preprocessing is Preprocessing.TEXT


def ask_texts(client: TritonClient, info: ModelInfo, texts: list[str], k: int) -> TextAnswers:
    """The pipeline's answers for `texts` (a token classifier gets one text per request: no padding to strip)."""
    if [t.name for t in info.inputs] != [TEXT] or info.inputs[0].datatype != "BYTES":
        raise ClientError(
            f"model {info.name!r} does not take texts ({', '.join(t.name for t in info.inputs)})",
            hint="send texts to the NAME_pipeline model: its server tokenizes them",
        )
    output = info.outputs[0].name
    if info.task == TOKEN_CLASSIFICATION.name:
        rows = [client.infer(info.name, _request([t]), outputs=[output])[output][0] for t in texts]
        labels = [[label_for(int(i), info.labels) for i in np.argmax(row, axis=-1)] for row in rows]
        return TextAnswers(info.task, texts, labels=labels)
    size = info.max_batch_size or 1
    chunks = [texts[start : start + size] for start in range(0, len(texts), size)]
    results = client.infer_many(info.name, [_request(chunk) for chunk in chunks], outputs=[output])
    values = np.concatenate([np.atleast_2d(r[output]).astype(np.float32) for r in results])
    if info.task == TEXT_CLASSIFICATION.name:
        ranked = [[p.to_dict() for p in best] for best in top_k(values, info.labels, k)]
        return TextAnswers(info.task, texts, top_k=ranked)
    if info.task == SENTENCE_EMBEDDING.name:
        unit = values / np.maximum(np.linalg.norm(values, axis=1, keepdims=True), 1e-12)
        similarity = np.round(unit @ unit.T, 6).tolist()
        return TextAnswers(info.task, texts, embeddings=values.tolist(), similarity=similarity)
    raise ClientError(f"model {info.name!r} is a {info.task} model, not a text model", hint="pass image files instead")


def _request(texts: list[str]) -> Tensors:
    return {TEXT: np.array([[t.encode("utf-8")] for t in texts], dtype=object)}


def show_text_answers(answers: TextAnswers, echo: Callable[[str], None]) -> None:
    """Print the answers: per text its classes, token labels or embedding summary; then the similarities."""
    for index, text in enumerate(answers.texts):
        echo(f"[{index}] {text}")
        if answers.top_k:
            for rank, entry in enumerate(answers.top_k[index], 1):
                echo(f"  {rank}. {entry['label']:<24} {entry['probability']:7.2%}  (score {entry['score']:.4f})")
        if answers.labels:
            echo("  " + " ".join(answers.labels[index]))
        if answers.embeddings:
            vector = answers.embeddings[index]
            head = ", ".join(f"{v:.4f}" for v in vector[:4])
            echo(f"  embedding: {len(vector)} values, norm {np.linalg.norm(vector):.4f}: [{head}, ...]")
    if len(answers.similarity) > 1:
        echo("cosine similarity:")
        for index, row in enumerate(answers.similarity):
            echo(f"  [{index}] " + " ".join(f"{v:6.3f}" for v in row))
