"""Hugging Face folders, named `transformers/CLASS`: claimed by their files (config.json beside the weights, or a
sentence-transformers modules.json), built by transformers' own class from config.json alone, their weights renamed
as transformers renames them, behind the tensor interface of what feeds them (`families.hf_text`,
`families.hf_vision`). An image model's preprocessing is its image processor's (preprocessor_config.json, read by
transformers' `AutoImageProcessor`, reproduced by `preprocess.hf_processor`), and the processor itself is the
reference `parity --images` compares against. Labels come from config.json's id2label. transformers models hold
their config and do not script."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from modelship.checkpoint.families.hf_folder import ARCH_PREFIX, HFFolder, is_hf_checkpoint, read_hf_folder
from modelship.checkpoint.families.registry import (
    Folder,
    FolderModel,
    Match,
    ModelFamily,
    ReferenceTransform,
    StateDict,
    register_family,
)
from modelship.contract.preprocessing import PreprocessSpec


def opens(checkpoint: Path, arch: str | None, notes: list[str]) -> Folder | None:
    """The Hugging Face checkpoint at `checkpoint`, read from its config.json; None for a plain checkpoint, and when
    --arch names the code that builds the model (`package.module:Factory`): the factory wins over a config.json
    beside the weights, which is then not read (the weights file is loaded as a plain checkpoint)."""
    if not is_hf_checkpoint(checkpoint):
        return None
    if arch and ":" in arch:
        notes.append(f"{arch} builds the model (--arch): the config.json beside the weights is not read")
        return None
    folder = read_hf_folder(checkpoint, arch)
    detail = f"{folder.architecture} from {folder.root / 'config.json'}, exported for {folder.task}"
    source = "flag" if arch else "config.json"
    return Folder(
        folder.weights, folder.arch, source, detail, lambda weights, match, said: _build(folder, weights, match, said)
    )


def _build(folder: HFFolder, state_dict: StateDict, match: Match, notes: list[str]) -> FolderModel:
    """The transformers class built from the config, the weights matched (renamed as transformers renames them, a
    stale position_ids buffer left out), behind the tensor interface of what feeds it."""
    from modelship.checkpoint.families.hf_build import build_hf_model, transformers_renames
    from modelship.checkpoint.keymap import strip_all_wrappers
    from modelship.checkpoint.metadata import CheckpointMetadata
    from modelship.contract.labels import clean_labels

    notes.append(f"weights read from {folder.weights}")
    model = build_hf_model(folder)
    own = set(model.state_dict())
    stale = [k for k in state_dict if k.endswith("position_ids") and strip_all_wrappers(k) not in own]
    if stale:  # a buffer older transformers saved and newer ones rebuild (known: embeddings.position_ids)
        state_dict = {k: v for k, v in state_dict.items() if k not in stale}
        notes.append(f"left out {', '.join(stale)}: a buffer this transformers version rebuilds itself")
    renames = transformers_renames(model, [strip_all_wrappers(k) for k in state_dict])
    match({renames.get(strip_all_wrappers(k), k): v for k, v in state_dict.items()}, model, renames)
    if renames:
        first = next(iter(renames.items()))
        notes.append(
            f"{len(renames)} keys renamed as transformers renames them when it loads {folder.architecture} "
            f"(e.g. {first[0]} -> {first[1]})"
        )
    labels = clean_labels(folder.labels, f"{folder.root / 'config.json'}: id2label")[0] if folder.labels else None
    metadata = CheckpointMetadata(labels=labels, task=folder.task)
    if folder.fed_by == "image":
        from modelship.checkpoint.families.hf_vision import image_spec, wrap_image_model

        assert folder.processor is not None  # what fed_by "image" says
        image_spec(folder)  # refused now, not at export, when modelship cannot reproduce the processor
        notes.append(f"image model: pixel_values in, as {folder.processor.name} makes them; logits out")
        return FolderModel(wrap_image_model(model, folder), metadata)
    from modelship.checkpoint.families.hf_text import text_io, wrap_text_model
    from modelship.contract.tokenizer import TokenizerSource

    wrapped = wrap_text_model(model, folder)
    notes.append(f"text model: {', '.join(folder.inputs)} in; {'embedding' if wrapped.embedding else 'logits'} out")
    if folder.tokenizer is None:
        notes.append("no tokenizer.json in the folder: the export takes token ids (no text pipeline)")
    tokenizer = (
        TokenizerSource(folder.tokenizer, folder.tokenizer_spec)
        if folder.tokenizer is not None and folder.tokenizer_spec
        else None
    )
    return FolderModel(wrapped, dataclasses.replace(metadata, io=text_io(folder, model)), tokenizer)


def serving_spec(model: Any, arch: str, checkpoint: Path) -> PreprocessSpec | None:
    from modelship.checkpoint.families.hf_vision import image_spec

    folder = read_hf_folder(Path(checkpoint), arch)
    return image_spec(folder) if folder.processor is not None else None


def reference_transform(model: Any, arch: str, checkpoint: Path) -> ReferenceTransform | None:
    from modelship.checkpoint.families.hf_vision import read_processor

    folder = read_hf_folder(Path(checkpoint), arch)
    if folder.processor is None:
        return None
    processor = read_processor(folder)

    def transform(image: Any) -> Any:
        return processor(images=image, return_tensors="pt")["pixel_values"][0]

    return ReferenceTransform(transform, f"transformers {type(processor).__name__} ({folder.processor})")


FAMILY = register_family(
    ModelFamily(
        "huggingface",
        owns=lambda arch: arch.startswith(ARCH_PREFIX),
        opens=opens,
        serving_spec=serving_spec,
        reference_transform=reference_transform,
        scripts=False,
    )
)
