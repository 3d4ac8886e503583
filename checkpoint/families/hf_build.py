"""A Hugging Face folder's model built by transformers' own classes from its config.json alone (never from a hub,
never with code from the folder): the class its `architectures` names, filled from the class's own config class,
as `CLASS.from_pretrained` builds it, before the weights are copied in."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelship.checkpoint.families.hf_folder import HFFolder
from modelship.contract.errors import ArchitectureError, CheckpointError

if TYPE_CHECKING:
    from transformers import PreTrainedConfig, PreTrainedModel

NOT_CONFIG_FIELDS = ("architectures", "transformers_version", "model_type")  # config.json's, not the config class's


def build_hf_model(folder: HFFolder) -> PreTrainedModel:
    """The folder's transformers model with freshly initialised weights (eval mode), from its config alone: the
    class's own config class filled from config.json, as `CLASS.from_pretrained` builds it."""
    import transformers

    transformers.logging.set_verbosity_error()  # its info lines (a loss it would use for training) are not ours
    cls = getattr(transformers, folder.architecture, None)
    if not (isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel) and cls.config_class):
        raise ArchitectureError(
            f"{folder.architecture!r} is not a transformers model class (transformers {transformers.__version__})",
            hint="check config.json 'architectures' or --arch transformers/CLASS",
        )
    if not folder.arch_from_flag:
        _refuse_other_model_type(folder, cls.config_class)
    fields = {k: v for k, v in folder.config.items() if k not in NOT_CONFIG_FIELDS}
    if fields.get("use_pretrained_backbone"):  # the checkpoint holds the backbone's weights: never download them
        fields["use_pretrained_backbone"] = False
    try:
        return cls(cls.config_class(**fields)).eval()
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ArchitectureError(
            f"could not build {folder.architecture} from {folder.root / 'config.json'}: {exc}",
            hint="check the config's model_type and sizes",
        ) from None


def _refuse_other_model_type(folder: HFFolder, own: type[PreTrainedConfig]) -> None:
    """An ArchitectureError when config.json's model_type names another family than its architectures' class:
    transformers' Auto classes go by model_type (they would build another model from this folder, every weight
    missing), the class itself only with a warning that this is not supported."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    model_type = folder.config.get("model_type")
    if model_type is None or (model_type in CONFIG_MAPPING and CONFIG_MAPPING[model_type] is own):
        return
    raise ArchitectureError(
        f"{folder.root / 'config.json'}: model_type {model_type!r} contradicts architectures: "
        f"{folder.architecture} is a {own.model_type!r} model (transformers' Auto classes go by model_type)",
        hint=f'set "model_type": "{own.model_type}", or pass --arch {folder.arch} to build that class anyway',
    )


def transformers_renames(model: PreTrainedModel, keys: list[str]) -> dict[str, str]:
    """The checkpoint keys transformers itself renames when it loads `model` (its conversion mapping: the names
    `save_pretrained` writes for backward compatibility, e.g. ViT's `encoder.layer.N.attention.attention.query` for
    `layers.N.attention.q_proj`, and its base-model prefix added or dropped), old -> new for those that change.
    A CheckpointError when a key needs one of its tensor conversions (merging or splitting weights), which
    modelship does not perform."""
    from transformers.conversion_mapping import get_model_conversion_mapping
    from transformers.core_model_loading import WeightConverter, WeightRenaming, rename_source_key

    transforms = get_model_conversion_mapping(model)
    renamings = [t for t in transforms if isinstance(t, WeightRenaming)]
    converters = [t for t in transforms if isinstance(t, WeightConverter)]
    own = dict.fromkeys(model.state_dict(), True)  # rename_source_key tests its values against None
    renames = {}
    for key in keys:
        new, converted = rename_source_key(key, renamings, converters, model.base_model_prefix, own)
        if converted is not None:
            raise CheckpointError(
                f"{key}: transformers converts this weight ({converted}) when it loads {type(model).__name__}; "
                "modelship copies weights as saved",
                hint="save the model again with this transformers version, or pass a --key-map",
            )
        if new != key:
            renames[key] = new
    return renames
