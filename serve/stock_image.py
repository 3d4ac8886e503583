"""What the stock Triton image lacks for modelship's Python-backend models, and the Dockerfile that adds it.

`nvcr.io/nvidia/tritonserver:<release>-py3` has numpy in its Python backend, but not Pillow (`NAME_preprocess`
decodes images with it) nor `tokenizers` (`NAME_tokenize` runs the export's tokenizer.json); `NAME_postprocess`
needs numpy only. `modelship publish` and `modelship serve` print the Dockerfile for the models a repository holds.
"""

from __future__ import annotations

from collections.abc import Iterable

from modelship.contract.opsets import runtime_target

PACKAGES = {"_preprocess": "pillow>=10", "_tokenize": "tokenizers>=0.20"}  # model name suffix -> what it imports


def missing_packages(model_names: Iterable[str]) -> list[str]:
    """The packages the stock image lacks for these models, in a fixed order."""
    names = list(model_names)
    return [package for suffix, package in PACKAGES.items() if any(n.endswith(suffix) for n in names)]


def stock_dockerfile(model_names: Iterable[str]) -> str | None:
    """The two-line Dockerfile that serves these models in the stock image (None: it serves them as it is)."""
    packages = missing_packages(model_names)
    if not packages:
        return None
    quoted = " ".join(f"'{p}'" for p in packages)
    return f"FROM {runtime_target().image}\nRUN pip install --no-cache-dir {quoted}\n"
