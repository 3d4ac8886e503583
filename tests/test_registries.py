"""Every registry refuses a second entry under a name already taken, naming the registry and the name, unless told to
replace it (contract.registry.Registry.add); a replaced entry is put back as it was."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from modelship.checkpoint.families.registry import FAMILIES, register_family
from modelship.contract.artifacts import EXPORT_FORMATS, register_export_format
from modelship.contract.precisions import PRECISIONS, register_precision
from modelship.export.formats.exporters import export_formats
from modelship.export.formats.registry import FORMATS, register_format
from modelship.export.precision.registry import VARIANTS, register_variant
from modelship.parity.compare import COMPARE_FUNCTIONS, register_compare
from modelship.tasks.registry import TASKS, register_task

export_formats()  # the built-in exporters registered
REGISTRIES: list[tuple[str, dict[str, Any], Callable[..., Any], str]] = [
    ("task", TASKS, register_task, "classification"),
    ("precision", PRECISIONS, register_precision, "int8"),
    ("export format", EXPORT_FORMATS, register_export_format, "onnx"),
    ("export format", FORMATS, register_format, "onnx"),
    ("model family", FAMILIES, register_family, "torchvision"),
    ("output kind", COMPARE_FUNCTIONS, register_compare, "logits"),
    ("variant", VARIANTS, register_variant, "onnx_int8"),
]


@pytest.mark.parametrize(
    ("what", "registry", "register", "name"), REGISTRIES, ids=[r[0] + ":" + r[3] for r in REGISTRIES]
)
def test_a_duplicate_name_is_refused_unless_replaced(
    what: str, registry: dict[str, Any], register: Callable[..., Any], name: str
) -> None:
    original = registry[name]
    twin = replace(original)  # an equal entry counts as a second registration too
    with pytest.raises(ValueError, match=f"a {what} named '{name}' is already registered"):
        register(twin)
    assert registry[name] is original
    try:
        register(twin, replace=True)
        assert registry[name] is twin
    finally:
        register(original, replace=True)
