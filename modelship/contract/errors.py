"""One exception hierarchy for every mistake a user can make or fix.

Each error carries a one-line message that names the file or value at fault and, where there is one, the fix
(`hint`). The CLI prints `error: <message> (<hint>)` and exits with `exit_code`; with `--json` it prints
`{"ok": false, "error": ..., **details}`. Nothing here imports torch: clients use it too.
"""

from __future__ import annotations

from typing import TypeVar

from modelship.contract.json_object import JsonObject


class ModelshipError(Exception):
    """Base of every error a user can act on. Never raised for programming errors."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None, details: JsonObject | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = dict(details or {})

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


E = TypeVar("E", bound=ModelshipError)


class UsageError(ModelshipError):
    """A bad flag value or combination of flags."""

    exit_code = 2


class CheckpointError(ModelshipError):
    """The checkpoint file is missing, unreadable, unsafe to unpickle, or holds bad weights."""


class ArchitectureError(ModelshipError):
    """The architecture could not be resolved or instantiated."""


class KeyMappingError(ModelshipError):
    """State-dict keys or shapes do not match the architecture (details hold the grouped lists)."""


class ExportError(ModelshipError):
    """TorchScript or ONNX export, or fp16 conversion, failed."""


class ParityError(ModelshipError):
    """An artifact's outputs differ from the reference beyond tolerance, or could not be computed."""


class PreprocessError(ModelshipError):
    """An image could not be read or a preprocessing spec is invalid."""


class PublishError(ModelshipError):
    """Writing to a Triton model repository failed or was refused."""


class ServeError(ModelshipError):
    """The local Triton server could not be started or stopped."""


class TuneError(ModelshipError):
    """`modelship tune` could not tune: no config meets the budget, a server it may not change, a tune already
    running against the same server."""


class ClientError(ModelshipError):
    """A request to a Triton server failed: server down, unknown model, bad shape or dtype."""


class DemoError(ModelshipError):
    """A step of `make demo` gave a wrong answer (the served model, curl or a parity check)."""


def os_failure(error: type[E], exc: OSError, what: str, hint: str) -> E:
    """`error` for a filesystem refusal while doing `what`: the system's reason appended, errno in details."""
    return error(f"{what} ({exc.strerror or exc})", hint=hint, details={"errno": exc.errno})
