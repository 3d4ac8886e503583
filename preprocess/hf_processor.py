"""PreprocessSpecs from Hugging Face image processors (`preprocessor_config.json`, read by transformers' own
`AutoImageProcessor`): the resize rule and resample, the centre crop, rescale and normalisation, with the resampler of
the processor's backend (transformers 5's default torchvision backend resizes uint8 tensors with PyTorch's kernel,
its PIL backend with Pillow) and transformers' crop offset (floor).

A processor that does something the shared module cannot reproduce exactly (padding, a resize rule of its own) is
refused in one line naming the option. transformers is never imported here: the caller passes the processor.
"""

from __future__ import annotations

from typing import Any

from modelship.contract.errors import PreprocessError
from modelship.contract.preprocessing import (
    ChannelOrder,
    CropOffset,
    Interpolation,
    PreprocessSpec,
    Resampler,
    ResizeMode,
)

# the PIL.Image.Resampling values processors store
RESAMPLE = {2: Interpolation.BILINEAR, 3: Interpolation.BICUBIC, 0: Interpolation.NEAREST}
BACKEND_RESAMPLERS = {"torchvision": Resampler.TORCH, "pil": Resampler.PILLOW}
CONVNEXT_WARP = 384  # ConvNeXt's processor warps to a square from this size up, else resizes by 1/crop_pct and crops
# processors whose own code (labels of segmentation maps, ConvNeXt's crop_pct rule, MobileViT's channel flip) leaves
# their images' steps ones modelship reproduces; any other must use its backend's steps as they are
KNOWN = (
    "ViTImageProcessor",
    "DeiTImageProcessor",
    "BeitImageProcessor",
    "ConvNextImageProcessor",
    "SegformerImageProcessor",
    "BitImageProcessor",
    "MobileViTImageProcessor",
    "DetrImageProcessor",  # its own steps handle annotations; one image's are resize, rescale, normalise, pad to itself
)
BACKENDS = ("TorchvisionBackend", "PilBackend")
STEPS = ("_preprocess", "resize", "center_crop", "rescale", "normalize")


def from_image_processor(processor: Any) -> PreprocessSpec:
    """The spec that reproduces `processor(images=photo)["pixel_values"]` for one RGB photo."""
    name = type(processor).__name__
    _refuse_own_steps(processor, name)
    resampler = BACKEND_RESAMPLERS.get(getattr(processor, "backend", "pil"))
    if resampler is None:
        raise PreprocessError(
            f"{name}: backend {processor.backend!r} is not one modelship reproduces (torchvision or pil)"
        )
    if getattr(processor, "do_pad", None) and getattr(processor, "pad_size", None):
        raise PreprocessError(
            f"{name}: pad_size (padding every image to one size) is not reproduced by modelship's preprocessing",
            hint="drop pad_size from preprocessor_config.json: modelship takes one size per request, which do_pad "
            "leaves as it is",
        )
    resize, mode, crop = _resize_and_crop(processor, name)
    interpolation = RESAMPLE.get(int(processor.resample)) if processor.resample is not None else Interpolation.BILINEAR
    if interpolation is None or (interpolation is Interpolation.NEAREST and resampler is Resampler.TORCH):
        raise PreprocessError(
            f"{name}: resample {processor.resample} is not reproduced exactly",
            hint="use resample 2 (bilinear) or 3 (bicubic)",
        )
    normalise = bool(processor.do_normalize)
    return PreprocessSpec(
        resize=resize,
        resize_mode=mode,
        crop=crop,
        interpolation=interpolation,
        mean=tuple(processor.image_mean) if normalise else (0.0, 0.0, 0.0),
        std=tuple(processor.image_std) if normalise else (1.0, 1.0, 1.0),
        scale=float(processor.rescale_factor) if processor.do_rescale else 1.0,
        channel_order=ChannelOrder.BGR if getattr(processor, "do_flip_channel_order", None) else ChannelOrder.RGB,
        resampler=resampler,
        crop_offset=CropOffset.FLOOR,
        fused_normalize=resampler is Resampler.TORCH and normalise and bool(processor.do_rescale),
    )


def _resize_and_crop(processor: Any, name: str) -> tuple[Any, ResizeMode, tuple[int, int] | None]:
    """(resize, resize_mode, crop) of the spec, from the processor's size, crop_size and own resize rule."""
    size = processor.size
    crop = (processor.crop_size.height, processor.crop_size.width) if processor.do_center_crop else None
    if not processor.do_resize:
        return None, ResizeMode.SHORTER, crop
    if name.startswith("ConvNextImageProcessor") and size.shortest_edge:
        edge = size.shortest_edge
        if edge >= CONVNEXT_WARP:
            return (edge, edge), ResizeMode.EXACT, crop
        return int(edge / processor.crop_pct), ResizeMode.SHORTER, (edge, edge)
    if size.height and size.width:
        return (size.height, size.width), ResizeMode.EXACT, crop
    if size.shortest_edge and not size.longest_edge:
        return size.shortest_edge, ResizeMode.SHORTER, crop
    if size.shortest_edge and size.longest_edge:
        return (size.shortest_edge, size.longest_edge), ResizeMode.BOUNDED, crop
    given = {k: v for k, v in vars(size).items() if v} if hasattr(size, "__dict__") else size
    raise PreprocessError(
        f"{name}: size {given} is not reproduced exactly (height and width, shortest_edge, or shortest_edge and "
        "longest_edge)",
        hint='resize to "height" and "width", or to "shortest_edge", in preprocessor_config.json',
    )


def _refuse_own_steps(processor: Any, name: str) -> None:
    """A processor whose steps are its own code is refused unless modelship knows them (KNOWN): the shared module
    would silently differ from it. A processor that only configures its backend's steps is taken as it is."""
    if name.removesuffix("Pil") in KNOWN:
        return
    backend = next((cls for cls in type(processor).__mro__ if cls.__name__ in BACKENDS), None)
    if backend is None:
        raise PreprocessError(f"{name} is not a transformers image processor modelship reproduces")
    own = [step for step in STEPS if getattr(type(processor), step, None) is not getattr(backend, step, None)]
    if own:
        raise PreprocessError(
            f"{name}: its own {own[0].strip('_')} step is not reproduced by modelship's preprocessing",
            hint="export with a processor whose steps are resize, centre crop, rescale and normalise "
            f"({', '.join(KNOWN)})",
        )
