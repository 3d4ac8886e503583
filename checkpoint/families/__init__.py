"""Model families (`registry`) and the built-in ones: torchvision, timm, Hugging Face folders and a user's
factory, registered on import."""

from modelship.checkpoint.families import factories, hf_models, timm_models, torchvision_models
from modelship.checkpoint.families.registry import (
    FAMILIES,
    ModelFamily,
    ReferenceTransform,
    family_of,
    register_family,
    unregister_family,
)

BUILT_IN = (torchvision_models.FAMILY, timm_models.FAMILY, hf_models.FAMILY, factories.FAMILY)

__all__ = [
    "BUILT_IN",
    "FAMILIES",
    "ModelFamily",
    "ReferenceTransform",
    "family_of",
    "register_family",
    "unregister_family",
]
