"""Hugging Face checkpoints as users save them: a `save_pretrained` folder (config.json + model.safetensors or
pytorch_model.bin, the tokenizer or the image processor's preprocessor_config.json beside them), a
sentence-transformers folder (modules.json naming the transformer's folder, 1_Pooling/config.json, an optional
Normalize module), or a weights file with its config.json beside it.

Reading one decides everything from its JSON files alone: the transformers class (config.json `architectures`, or
`--arch transformers/CLASS`), the task it is exported for, the labels (`id2label`), the pooling of a sentence
embedding and the tokenizer's settings (`TokenizerSpec`), or for an image model the processor's file. A config that
asks for custom code (`auto_map`, `trust_remote_code`) is refused: files never run code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from modelship.contract.errors import CheckpointError
from modelship.contract.json_object import JsonObject
from modelship.contract.tokenizer import TOKENIZER_FILE, TokenizerSpec

CONFIG_FILE = "config.json"
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")
ARCH_PREFIX = "transformers/"
POOLING_MODES = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls", "pooling_mode_max_tokens": "max"}
PROCESSOR_FILE = "preprocessor_config.json"
EMBEDDING_TASK = "sentence-embedding"


@dataclass(frozen=True)
class Head:
    """A transformers head modelship exports: the class-name suffix that names it, the task it is exported for and
    what feeds it (`text`: a tokenizer; `image`: an image processor)."""

    suffix: str
    task: str
    fed_by: str
    model_types: tuple[str, ...] = ()  # only these config model_types (whose answers modelship computes), else all


# DETR's post-processing (softmax over the classes and "no object"): the detectors whose answers the detection
# wrapper computes (checkpoint.families.hf_vision.BoxTensors); Conditional/Deformable DETR and RT-DETR score with a
# sigmoid and keep the top queries and classes instead
SOFTMAX_DETECTORS = ("detr", "table-transformer", "yolos")
HEADS = (
    Head("ForSequenceClassification", "text-classification", "text"),
    Head("ForTokenClassification", "token-classification", "text"),
    Head("ForImageClassification", "classification", "image"),
    Head("ForSemanticSegmentation", "segmentation", "image"),
    Head("ForObjectDetection", "detection", "image", SOFTMAX_DETECTORS),
)
UNBOUNDED = 1_000_000  # transformers writes model_max_length = 1e30 when a tokenizer has no limit


@dataclass(frozen=True)
class Pooling:
    """How a sentence-transformers folder turns token states into one embedding: `mode` (mean, cls or max over
    the real tokens) and whether it is then L2-normalised."""

    mode: str
    normalize: bool


@dataclass(frozen=True)
class HFFolder:
    """What a Hugging Face checkpoint is, read from its files."""

    root: Path  # the folder holding config.json
    config: JsonObject
    weights: Path
    architecture: str  # a transformers class name: BertForSequenceClassification, BertModel, ...
    task: str
    tokenizer: Path | None
    tokenizer_spec: TokenizerSpec | None
    pooling: Pooling | None = None  # sentence embeddings only
    labels: list[str] | None = None
    arch_from_flag: bool = False  # the class came from --arch, not from config.json's architectures
    processor: Path | None = None  # an image model's preprocessor_config.json

    @property
    def fed_by(self) -> str:
        """ "image" for a model fed by an image processor, else "text"."""
        return "image" if self.processor is not None else "text"

    @property
    def arch(self) -> str:
        return ARCH_PREFIX + self.architecture

    @property
    def inputs(self) -> tuple[str, ...]:
        """The model's text inputs: the tokenizer's, else token ids and the mask."""
        return self.tokenizer_spec.inputs if self.tokenizer_spec else ("input_ids", "attention_mask")


def is_hf_checkpoint(path: Path) -> bool:
    """A folder with config.json or modules.json, or a weights file with a transformers config.json beside it."""
    if path.is_dir():
        return (path / CONFIG_FILE).is_file() or (path / "modules.json").is_file()
    beside = path.parent / CONFIG_FILE
    return path.is_file() and beside.is_file() and "model_type" in _json(beside, quiet=True)


def read_hf_folder(path: Path, arch: str | None = None) -> HFFolder:
    """The checkpoint at `path` (folder or weights file) described; CheckpointError naming what is missing."""
    folder = path if path.is_dir() else path.parent
    modules = _sentence_modules(folder)
    root = folder / modules["transformer"] if modules else folder
    config = _json(root / CONFIG_FILE)
    _refuse_custom_code(root, config)
    weights = path if path.is_file() else _weights(root)
    architecture = _architecture(root, config, arch)
    pooling = _pooling(folder, modules) if modules else None
    head = None if pooling else _head(root, architecture, config)
    task = head.task if head else EMBEDDING_TASK
    labels = _labels(root, config) if task != EMBEDDING_TASK else None
    if head is not None and head.fed_by == "image":
        processor = _beside(root, folder, PROCESSOR_FILE)
        if processor is None:
            raise CheckpointError(
                f"{root}: no {PROCESSOR_FILE} for {architecture}: modelship preprocesses images as its image "
                "processor does",
                hint="save the processor beside the model: AutoImageProcessor...save_pretrained(folder)",
            )
        _refuse_custom_code(root, _json(processor), processor.name)
        flagged = arch is not None
        return HFFolder(root, config, weights, architecture, task, None, None, None, labels, flagged, processor)
    tokenizer = _beside(root, folder, TOKENIZER_FILE)
    spec = _tokenizer_spec(root, folder, config, tokenizer) if tokenizer else None
    return HFFolder(root, config, weights, architecture, task, tokenizer, spec, pooling, labels, arch is not None)


def _json(path: Path, *, quiet: bool = False) -> JsonObject:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        if quiet:
            return {}
        raise CheckpointError(f"{path}: no such file", hint="pass the folder written by save_pretrained") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        if quiet:
            return {}
        raise CheckpointError(f"{path}: not readable JSON ({exc})", hint="save the folder again") from None
    if not isinstance(data, dict):
        if quiet:
            return {}
        raise CheckpointError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def _sentence_modules(folder: Path) -> dict[str, str] | None:
    """A sentence-transformers folder's modules by role (transformer, pooling, normalize -> their folder), from
    modules.json; None for a plain save_pretrained folder."""
    if not (folder / "modules.json").is_file():
        return None
    try:
        entries = json.loads((folder / "modules.json").read_text())
        roles = {entry["type"].rsplit(".", 1)[-1].lower(): entry.get("path", "") for entry in entries}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CheckpointError(f"{folder / 'modules.json'}: not a sentence-transformers module list ({exc})") from None
    unknown = sorted(set(roles) - {"transformer", "pooling", "normalize"})
    if unknown or "transformer" not in roles or "pooling" not in roles:
        raise CheckpointError(
            f"{folder / 'modules.json'}: modules {sorted(roles)} are not Transformer + Pooling (+ Normalize)",
            hint="modelship exports sentence-transformers models made of a Transformer, a Pooling and a Normalize",
        )
    return roles


def _refuse_custom_code(root: Path, config: JsonObject, name: str = CONFIG_FILE) -> None:
    for file, data in (
        (name, config),
        ("tokenizer_config.json", _json(root / "tokenizer_config.json", quiet=True)),
    ):
        if "auto_map" in data or data.get("trust_remote_code"):
            raise CheckpointError(
                f"{root / file} asks for custom code ({'auto_map' if 'auto_map' in data else 'trust_remote_code'}); "
                "modelship never runs code from a checkpoint",
                hint="pass the model's class with --arch pkg.module:Factory, from code you installed yourself",
            )


def _weights(root: Path) -> Path:
    for name in WEIGHT_FILES:
        if (root / name).is_file():
            return root / name
    if any(root.glob("*.index.json")):
        raise CheckpointError(
            f"{root}: sharded weights (*.index.json) are not supported yet",
            hint="save with save_pretrained(dir, max_shard_size='100GB') for one weights file",
        )
    raise CheckpointError(
        f"{root}: no weights file ({' or '.join(WEIGHT_FILES)})", hint="pass the folder written by save_pretrained"
    )


def _architecture(root: Path, config: JsonObject, arch: str | None) -> str:
    if arch:
        if not arch.startswith(ARCH_PREFIX):
            raise CheckpointError(
                f"--arch {arch!r} for a Hugging Face folder: expected {ARCH_PREFIX}CLASS",
                hint=f"e.g. --arch {ARCH_PREFIX}BertForTokenClassification (the folder's config.json is kept)",
            )
        return arch.removeprefix(ARCH_PREFIX)
    names = config.get("architectures") or []
    if not isinstance(names, list) or not all(isinstance(name, str) and name for name in names):
        example = names if isinstance(names, str) else "BertForSequenceClassification"
        raise CheckpointError(
            f"{root / CONFIG_FILE}: 'architectures' must be a list of class names, not {json.dumps(names)[:80]}",
            hint=f'write it as "architectures": ["{example}"], or pass --arch {ARCH_PREFIX}CLASS',
        )
    if not names:
        raise CheckpointError(
            f"{root / CONFIG_FILE} names no architecture ('architectures' is empty)",
            hint=f"pass --arch {ARCH_PREFIX}CLASS, e.g. {ARCH_PREFIX}BertForSequenceClassification",
        )
    return names[0]


def _head(root: Path, architecture: str, config: JsonObject) -> Head:
    head = next((h for h in HEADS if architecture.endswith(h.suffix)), None)
    if head is None:
        raise CheckpointError(
            f"{root}: {architecture} is not a model modelship exports yet (sequence, token or image classification, "
            "semantic segmentation, object detection, or a sentence-transformers folder)",
            hint="a bare encoder exports as a sentence-transformers folder (modules.json, 1_Pooling/config.json)",
        )
    model_type = config.get("model_type")
    if head.model_types and model_type not in head.model_types:
        raise CheckpointError(
            f"{root}: {architecture} ({model_type}) answers {head.task} with its own post-processing, which modelship "
            f"does not compute yet (it computes {', '.join(head.model_types)}'s)",
            hint="export a DETR (DetrForObjectDetection), or the model's raw outputs with --arch pkg.module:Factory",
        )
    return head


def _pooling(folder: Path, modules: dict[str, str]) -> Pooling:
    path = folder / modules["pooling"] / CONFIG_FILE
    config = _json(path)
    modes = [mode for key, mode in POOLING_MODES.items() if config.get(key)]
    other = sorted(k for k, v in config.items() if k.startswith("pooling_mode_") and v and k not in POOLING_MODES)
    if len(modes) != 1 or other:
        raise CheckpointError(
            f"{path}: pooling {modes + other or 'none'} is not supported (one of mean, cls or max tokens)",
            hint="modelship exports one pooling mode: mean, cls or max over the real tokens",
        )
    return Pooling(modes[0], "normalize" in modules)


def _beside(root: Path, folder: Path, name: str) -> Path | None:
    """The file `name` in the model's folder, else in the folder given (a sentence-transformers folder's top)."""
    for place in (root, folder):
        if (place / name).is_file():
            return place / name
    return None


def _tokenizer_spec(root: Path, folder: Path, config: JsonObject, tokenizer: Path) -> TokenizerSpec:
    """The settings transformers' tokenizer would use: the longest input the model takes (sentence-transformers'
    max_seq_length, else the tokenizer's model_max_length, capped by the model's max_position_embeddings) and the
    pad token (tokenizer.json's padding, else the special-tokens map, else config.json's pad_token_id)."""
    saved = _json(tokenizer)
    tokenizer_config = _json(root / "tokenizer_config.json", quiet=True)
    limits = [
        _json(folder / "sentence_bert_config.json", quiet=True).get("max_seq_length"),
        tokenizer_config.get("model_max_length"),
        (saved.get("truncation") or {}).get("max_length"),
    ]
    length = next((int(n) for n in limits if isinstance(n, (int, float)) and 2 <= n < UNBOUNDED), None)
    positions = config.get("max_position_embeddings")
    if isinstance(positions, int) and (length is None or length > positions):
        length = positions
    if length is None:
        raise CheckpointError(
            f"{tokenizer}: no maximum length (tokenizer_config.json model_max_length, config.json "
            "max_position_embeddings)",
            hint="set model_max_length in tokenizer_config.json",
        )
    pad_token, pad_id = _pad(saved, tokenizer_config, config, tokenizer)
    inputs = ("input_ids", "attention_mask", *(("token_type_ids",) if config.get("type_vocab_size", 0) > 1 else ()))
    return TokenizerSpec(max_length=length, pad_id=pad_id, pad_token=pad_token, inputs=inputs)


def _pad(saved: dict, tokenizer_config: dict, config: dict, tokenizer: Path) -> tuple[str, int]:
    padding = saved.get("padding") or {}
    if isinstance(padding.get("pad_id"), int) and padding.get("pad_token"):
        return str(padding["pad_token"]), int(padding["pad_id"])
    token = tokenizer_config.get("pad_token")
    token = token.get("content") if isinstance(token, dict) else token
    vocab = {entry["content"]: entry["id"] for entry in saved.get("added_tokens", []) if "content" in entry}
    if isinstance(token, str) and token in vocab:
        return token, int(vocab[token])
    if isinstance(config.get("pad_token_id"), int):
        return str(token or config["pad_token_id"]), int(config["pad_token_id"])
    raise CheckpointError(
        f"{tokenizer}: no pad token (tokenizer.json padding, tokenizer_config.json pad_token, config.json "
        "pad_token_id)",
        hint="set pad_token in tokenizer_config.json",
    )


def _labels(root: Path, config: JsonObject) -> list[str] | None:
    """The labels of id2label in output order; a CheckpointError unless its keys are exactly 0..n-1 (transformers
    sizes the head by the number of labels: n outputs)."""
    mapping = config.get("id2label")
    if not mapping:
        return None
    if not isinstance(mapping, dict):
        raise CheckpointError(
            f"{root / CONFIG_FILE}: id2label must map output indexes to labels, not {json.dumps(mapping)[:80]}",
            hint='write it as {"0": "first label", "1": "second label", ...}',
        )
    indexes = {_index(key): str(label) for key, label in mapping.items()}
    size = len(mapping)
    if set(indexes) != set(range(size)):
        keys = ", ".join(repr(_index(key)) for key in list(mapping)[:6])
        raise CheckpointError(
            f"{root / CONFIG_FILE}: id2label has keys {keys}{', ...' if size > 6 else ''}; a head of {size} outputs "
            f"needs exactly 0..{size - 1}",
            hint=f'key id2label by output index, "0" to "{size - 1}", one label per output',
        )
    return [indexes[i] for i in range(size)]


def _index(key: str) -> int | str:
    """An id2label key as an output index, or the key itself when it is not one."""
    return int(key) if key.isdigit() else key
