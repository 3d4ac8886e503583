"""What the stock Triton image lacks for modelship's Python-backend models, and the Dockerfile that adds it.

`nvcr.io/nvidia/tritonserver:<release>-py3` has numpy in its Python backend; what else each Python model imports is
read off its template's imports (serve.vendoring): Pillow for `NAME_preprocess` (it decodes images), `tokenizers`
for `NAME_tokenize` (the export's tokenizer.json); `NAME_postprocess` needs numpy only. `modelship publish` and
`modelship serve` print the Dockerfile for the models a repository holds.
"""

from __future__ import annotations

from collections.abc import Iterable

from modelship.contract.opsets import runtime_target
from modelship.serve.image_pipeline import POSTPROCESS_SUFFIX, PREPROCESS_SUFFIX
from modelship.serve.text_pipeline import TOKENIZE_SUFFIX
from modelship.serve.vendoring import needs, template

# a Python model's name suffix -> the templates a model of that name is written from
TEMPLATES = {
    PREPROCESS_SUFFIX: ("preprocess",),
    POSTPROCESS_SUFFIX: ("postprocess", "box_postprocess"),
    TOKENIZE_SUFFIX: ("tokenize",),
}


def missing_packages(model_names: Iterable[str]) -> list[str]:
    """The packages the stock image lacks for these models, in a fixed order."""
    names = list(model_names)
    wanted = [
        requirement
        for suffix, templates in TEMPLATES.items()
        if any(n.endswith(suffix) for n in names)
        for name in templates
        for requirement in needs(template(name)).requirements
    ]
    return list(dict.fromkeys(wanted))


def stock_dockerfile(model_names: Iterable[str]) -> str | None:
    """The two-line Dockerfile that serves these models in the stock image (None: it serves them as it is)."""
    packages = missing_packages(model_names)
    if not packages:
        return None
    quoted = " ".join(f"'{p}'" for p in packages)
    return f"FROM {runtime_target().image}\nRUN pip install --no-cache-dir {quoted}\n"
