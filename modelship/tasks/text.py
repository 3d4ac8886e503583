"""Text tasks, fed by a tokenizer (`modelship.preprocess.tokenizer`; the export holds its tokenizer.json):

- `text-classification`: class scores per text ([batch, labels]), judged as logits (tolerance, top-1 / top-k);
  served with its labels (config.json's id2label);
- `token-classification`: class scores per token ([batch, sequence, labels]), judged as logits with top-1 / top-k
  over every token (`token_logits`); served with its labels;
- `sentence-embedding`: one vector per text ([batch, dim], pooled and normalised inside the graph), judged by
  similarity (per-row cosine) and element-wise tolerance.
"""

from __future__ import annotations

from collections.abc import Callable

from modelship.contract.iospec import IOSpec
from modelship.tasks.classification import top_k
from modelship.tasks.registry import Preprocessing, Task, register_task


def _takes_tokens(io: IOSpec) -> bool:
    return bool(io.inputs) and io.inputs[0].name == "input_ids" and io.inputs[0].dtype == "int64"


def _claims(output: str, rank: int) -> Callable[[IOSpec], bool]:
    """A model taking token ids whose first output is `output` of rank `rank`."""

    def claims(io: IOSpec) -> bool:
        first = io.outputs[0] if io.outputs else None
        return _takes_tokens(io) and first is not None and first.name == output and len(first.shape) == rank

    return claims


TEXT_CLASSIFICATION = register_task(
    Task(
        name="text-classification",
        description="class scores per text, compared as logits by tolerance and top-k; served with its labels",
        output_kind=lambda spec: "logits",
        claims=_claims("logits", 2),
        preprocessing=Preprocessing.TEXT,
        labels=True,
        answer=top_k,
    )
)
TOKEN_CLASSIFICATION = register_task(
    Task(
        name="token-classification",
        description="class scores per token, compared as logits by tolerance and top-k over every token",
        output_kind=lambda spec: "token_logits",
        claims=_claims("logits", 3),
        preprocessing=Preprocessing.TEXT,
        labels=True,
    )
)
SENTENCE_EMBEDDING = register_task(
    Task(
        name="sentence-embedding",
        description="one vector per text, compared by cosine similarity per row and element-wise tolerance",
        output_kind=lambda spec: "tensor",
        claims=_claims("embedding", 2),
        preprocessing=Preprocessing.TEXT,
    )
)
