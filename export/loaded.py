"""`export_loaded`: a model the checkpoint loader returned -> the export run (export.run), with everything the load
knows carried through: the checkpoint's provenance (the manifest's source and the checkpoint.json sidecar), its
metadata (io, labels, task), its preprocessing and a text model's tokenizer. The one way `export-model` and every
bench suite export a loaded model."""

from __future__ import annotations

from modelship.checkpoint import LoadedModel
from modelship.contract.json_object import JsonObject
from modelship.contract.manifest import Source
from modelship.contract.preprocessing import PreprocessSpec
from modelship.export.run import ExportResult, run_export
from modelship.export.spec import ExportSpec
from modelship.export.steps import Steps


def export_loaded(
    loaded: LoadedModel, spec: ExportSpec, *, preprocess: PreprocessSpec | None = None, steps: Steps | None = None
) -> ExportResult:
    """Export, verify and write `spec.out_dir` from `loaded` (run_export's errors, nothing written on failure).

    `preprocess` wins over the checkpoint's own spec and its family's (`LoadedModel.serving_spec`): a --preprocess
    flag, or a bench model's known preprocessing.
    """
    return run_export(
        loaded.model,
        spec,
        source=_source(loaded),
        metadata=loaded.metadata,
        preprocess=preprocess or loaded.serving_spec(),
        sidecar=_sidecar(loaded),
        steps=steps,
        tokenizer=loaded.tokenizer,
        preprocess_given=preprocess is not None,
    )


def _source(loaded: LoadedModel) -> Source:
    """The manifest's record of the checkpoint and how its architecture was resolved."""
    return Source(
        checkpoint=loaded.report.checkpoint,
        sha256=loaded.checkpoint_sha256,
        arch=loaded.arch,
        arch_kwargs=dict(loaded.arch_kwargs or {}),
        arch_source=loaded.arch_source,
    )


def _sidecar(loaded: LoadedModel) -> JsonObject:
    """checkpoint.json: the source, the checkpoint's metadata and the load report, written beside the artifacts."""
    return {
        "checkpoint": loaded.report.checkpoint,
        "sha256": loaded.checkpoint_sha256,
        "arch": loaded.arch,
        "arch_kwargs": loaded.arch_kwargs,
        "arch_source": loaded.arch_source,
        "metadata": loaded.metadata.to_dict(),
        "load_report": loaded.report.to_dict(),
    }
