"""TorchScript (`--torchscript`): how Triton serves its module (model.pt, whose flag and file the contract
registers with the built-in formats: contract.artifacts). The module is scripted or traced by jit.py, through
exporter.py; runner.py loads it for `modelship parity`; its fp16 variant is export.precision.fp16's."""

from modelship.contract.artifacts import EXPORT_FILES, TORCHSCRIPT
from modelship.export.formats.registry import register_served

FORMAT = TORCHSCRIPT
FILE = EXPORT_FILES.find(FORMAT)

register_served(FORMAT, platform="pytorch_libtorch", file=FILE)
