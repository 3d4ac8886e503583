"""Model families (`registry`) and the built-in ones: torchvision, timm, Hugging Face folders and a user's
factory, registered on import."""

from modelship.checkpoint.families import factories, hf_models, timm_models, torchvision_models  # noqa: F401
from modelship.checkpoint.families.registry import (
    AUX_VARIANT,
    FAMILIES,
    Adapted,
    Folder,
    FolderModel,
    ModelFamily,
    ReferenceTransform,
    TrainingRecord,
    adapt_model,
    families,
    family_of,
    open_folder,
    register_family,
    training_record,
    unregister_family,
)

__all__ = [
    "AUX_VARIANT",
    "FAMILIES",
    "Adapted",
    "Folder",
    "FolderModel",
    "ModelFamily",
    "ReferenceTransform",
    "TrainingRecord",
    "adapt_model",
    "families",
    "family_of",
    "open_folder",
    "register_family",
    "training_record",
    "unregister_family",
]
