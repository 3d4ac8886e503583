"""Every artifact of an export built: each format's exporter started in its order (export.formats), each fp32
artifact's variants at the precisions asked for started right after it (export.precision.registry), then each
finished and recorded, in the manifest's order, with its size, step times and sha256."""

from __future__ import annotations

from dataclasses import dataclass, replace

from modelship.contract.artifacts import EXPORT_FILES
from modelship.contract.manifest import Artifact, Declined, sha256_file
from modelship.contract.parity_report import ParityReport
from modelship.export.build import Build, BuiltArtifact, Finish, Verification
from modelship.export.formats.exporters import exporters_for
from modelship.export.precision.registry import artifact_order, variants_of


@dataclass(frozen=True)
class Made:
    """What the artifact steps made: the artifacts in a manifest's order and their verdicts, the variants declined,
    the files written besides the artifacts, and the sets an artifact was judged on when not the export's."""

    artifacts: list[Artifact]
    reports: dict[str, ParityReport]
    declined: list[Declined]
    files: list[str]
    judged: dict[str, Verification]

    @property
    def failed(self) -> list[str]:
        return [name for name, report in self.reports.items() if not report.passed]


def build_artifacts(build: Build) -> Made:
    """Start every artifact, then finish each (see the module doc)."""
    finishing: list[Finish] = []
    for exporter in exporters_for(build.spec.formats):
        for started in exporter.start(build):
            finishing.append(started.finish)
            for variant in variants_of(started.written.format, build.spec.precisions):
                finishing.append(variant.start(build, started.written))
    results = [finish() for finish in finishing]
    order = artifact_order()
    built = sorted((r for r in results if isinstance(r, BuiltArtifact)), key=lambda b: order.index(b.name))
    return Made(
        [_recorded(build, art) for art in built],
        {art.name: art.report for art in built},
        [r for r in results if isinstance(r, Declined)],
        [f for art in built for f in art.files],
        {art.name: art.judged for art in built if art.judged is not None},
    )


def _recorded(build: Build, art: BuiltArtifact) -> Artifact:
    """The manifest's record of one artifact: its file's size and sha256, and its steps' times."""
    path = build.path(art.name)
    details = replace(art.details, bytes=path.stat().st_size, seconds=build.steps.seconds(art.name))
    digest = art.sha256 or sha256_file(path)
    return Artifact(art.name, art.format, art.precision, EXPORT_FILES[art.name], digest, art.io, art.report, details)
