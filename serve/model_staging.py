"""Stage one Triton model (its version folder and model-level files) into a publish's commit plan, and the check
that a new version can be served beside the versions already there. Nothing in the repository changes here:
serve.repository's journaled commit applies the plan."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from modelship.contract.errors import PublishError, os_failure
from modelship.serve import repository
from modelship.serve.triton_config import LABELS_FILE, ServingOptions, parse_config

CONFIG_FILE = "config.pbtxt"
PREPROCESS_FILE = "preprocess.json"


def config_path(repo: Path, model_name: str) -> Path:
    return repo / model_name / CONFIG_FILE


def install(
    plan: repository.StagedChanges,
    repo: Path,
    model_name: str,
    number: int,
    version_files: Callable[[Path], None],
    model_files: Mapping[str, str | bytes],
) -> Path:
    """Stage one model into the plan's staging folder (`version_files(version_dir)` writes the version folder,
    `model_files` the model-level files by relative path) and add the renames that install it: a new model
    appears whole; an existing one gets the new version folder and its model-level files replaced. Nothing in
    `repo` changes here; returns the version folder it will have."""
    model_dir = repo / model_name
    staged = plan.folder / model_name
    version_dir = staged / str(number)
    try:
        version_files(version_dir)
        for relative, content in model_files.items():
            target = staged / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content if isinstance(content, bytes) else content.encode())
    except OSError as exc:
        hint = "free space on the repository's filesystem, or publish elsewhere (--repo)"
        raise os_failure(PublishError, exc, f"{plan.folder}: cannot stage {model_name}", hint) from None
    parse_config(str(model_files[CONFIG_FILE]), str(model_dir / CONFIG_FILE))
    if not model_dir.exists():
        plan.new(staged, model_dir)  # a new model appears whole, config and version together
    else:
        plan.new(version_dir, model_dir / str(number))
        for relative in model_files:
            folder = Path(relative).parts[0]
            if folder != relative and not (model_dir / folder).exists():
                if not any(c.target == str(model_dir / folder) for c in plan.changes):
                    plan.new(staged / folder, model_dir / folder)  # a model-level folder new to this model
            else:
                plan.replace(staged / relative, model_dir / relative)
        for stale in {LABELS_FILE, PREPROCESS_FILE} - set(model_files):
            if (model_dir / stale).exists():
                plan.remove(model_dir / stale)
    return model_dir / str(number)


def check_compatible(model_dir: Path, config: Any, options: ServingOptions) -> None:
    """Refuse a new version whose tensors differ from the served ones while several versions are served."""
    existing = model_dir / CONFIG_FILE
    if options.keep_versions == 1 or not existing.is_file() or not repository.versions(model_dir):
        return
    old = parse_config(existing.read_text(), str(existing))
    if (list(old.input), list(old.output), old.max_batch_size) != (
        list(config.input),
        list(config.output),
        config.max_batch_size,
    ):
        raise PublishError(
            f"{model_dir.name}: inputs/outputs differ from the versions already served together with this one",
            hint="publish under a new --name, or serve only the latest version (--keep-versions 1)",
        )
