"""`classification`: class scores per image. Every output is compared as logits (tolerance, cosine, and top-1 /
top-k agreement where it is classifier-shaped); a served model publishes its labels and Triton's classification
extension; `modelship infer` shows the top-k classes with softmax probabilities. The default task: a model no other
task claims is judged this way, as every export was before tasks existed."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from modelship.contract.labels import label_for
from modelship.tasks.registry import DEFAULT_TASK, Prediction, Preprocessing, Task, register_task


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits.astype(np.float64) - logits.max(axis=-1, keepdims=True)
    exp = np.exp(shifted)
    return exp / exp.sum(axis=-1, keepdims=True)


def top_k(scores: np.ndarray, labels: Sequence[str] | None, k: int) -> list[list[Prediction]]:
    """Per row: the k best classes, best first."""
    probabilities = softmax(scores)
    rows = []
    for row, probs in zip(scores, probabilities, strict=True):
        best = np.argsort(-row, kind="stable")[:k]
        rows.append(
            [
                Prediction(
                    index=int(i),
                    label=label_for(int(i), labels),
                    score=float(row[i]),
                    probability=float(probs[i]),
                )
                for i in best
            ]
        )
    return rows


CLASSIFICATION = register_task(
    Task(
        name=DEFAULT_TASK,
        description="class scores per image, compared as logits by tolerance and top-k; served with its labels",
        output_kind=lambda spec: "logits",
        preprocessing=Preprocessing.IMAGE,
        labels=True,
        answer=top_k,
    )
)
