"""modelship preprocess: one image-preprocessing implementation (numpy + Pillow, no torch) used everywhere.

`PreprocessSpec` (a contract type, `modelship.contract.preprocessing`) says what to do and is stored in the
manifest; `transform`/`preprocess_images` do it; the builders derive a spec from timm or torchvision configs
(importing those libraries only when called).
"""

from modelship.contract.preprocessing import PreprocessSpec
from modelship.preprocess.builders import from_timm, from_timm_config, from_torchvision, to_torchvision
from modelship.preprocess.image import (
    center_crop,
    decode_image,
    image_files,
    load_image,
    preprocess_images,
    resized_size,
    to_rgb,
    transform,
)

__all__ = [
    "PreprocessSpec",
    "center_crop",
    "decode_image",
    "from_timm",
    "from_timm_config",
    "from_torchvision",
    "image_files",
    "load_image",
    "preprocess_images",
    "resized_size",
    "to_rgb",
    "to_torchvision",
    "transform",
]
