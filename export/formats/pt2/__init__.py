"""torch.export (`--pt2`): the ExportedProgram (model.pt2) and the AOTInductor package compiled from it
(model.aoti.pt2), whose flag and files the contract registers with the built-in formats (contract.artifacts).
Neither is served by the Triton releases modelship targets, so neither has a Triton fragment. program.py makes
them, through exporter.py; runner.py loads them for `modelship parity`."""

from modelship.contract.artifacts import AOTI, PT2

FORMAT = PT2
__all__ = ["AOTI", "FORMAT"]
