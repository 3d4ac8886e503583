"""What `modelship infer` sends for one photo when a model answers per photo (segmenters, detectors): the file's
bytes to a `_pipeline` (its server decodes and preprocesses), else the photo preprocessed with the model's
published spec, one image per request so each keeps its own size."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from modelship.contract.errors import ClientError, UsageError
from modelship.preprocess.image import transform
from modelship.serve.model_info import ModelInfo, TensorInfo


def photo_request(info: ModelInfo, tensor: TensorInfo, path: Path, photo: Image.Image) -> np.ndarray:
    """The model's input for one photo: its file's bytes (a pipeline), else its preprocessed pixels."""
    if tensor.datatype == "BYTES":
        return np.array([[Path(path).read_bytes()]], dtype=object)
    spec = info.preprocess
    if spec is None:
        raise ClientError(f"model {info.name!r} publishes no preprocessing spec", hint="publish it again")
    return transform(photo, spec)[None].astype(tensor.dtype, copy=False)


def save_folder(save: Path | None) -> Path | None:
    """`--save DIR`, created; a UsageError when it cannot be."""
    if save is not None:
        try:
            save.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--save {save}: cannot create the folder ({exc.strerror or exc})") from None
    return save
