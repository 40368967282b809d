"""Image processing without torchvision: transformers' own PIL processors, and our torch-only
twin where transformers has none.

transformers 5 ships two backends for most image processors, torchvision (its default) and PIL,
and falls back to PIL by itself when torchvision is missing. A few of its modules import
torchvision unconditionally, though, and vLLM's vision-language models and the reference
libraries import helpers from exactly those (``smart_resize`` from Qwen2-VL's torchvision
processor module, for Qwen2-VL, Qwen2.5-VL, Qwen3-VL and ColQwen3). Where torchvision cannot
be imported (the CPU machines: PyPI's torchvision wheels are CUDA builds that fail to load next
to a CPU torch), :func:`use_pil_image_processors` makes those module names resolve to their PIL
twins, which transformers itself provides with the same functions and a processor of the same
behaviour.

LFM2-VL's image processor exists in transformers only as a torchvision processor (no PIL twin;
vLLM's ``lfm2_vl`` imports its module, and the processor cannot even be loaded without it). Its
twin is ours, :mod:`vllm_factory.heads.colpali.image_processing_lfm2_vl` (torch alone: the same tiles,
resizing, normalisation and patches), registered under both of transformers' module names for it
(``image_processing_lfm2_vl`` and the older ``image_processing_lfm2_vl_fast`` that vLLM 0.28 and
0.30 import) and made visible where transformers looks the class up by name (:data:`TWIN_CLASSES`).

Without torchvision transformers also hides its video processor classes (the auto class, the
base classes, each model's), although their modules import torchvision only where it is
present; a processor that names a video processor (``Qwen3VLProcessor``) then cannot even be
built, for images alone. :data:`VIDEO_CLASSES` are made visible again under their public names.
Their video transforms still need torchvision; image retrieval never calls them (the ColPali
models serve images and text only). With a working torchvision (the GPU hosts) nothing is
changed.

Importing this module imports neither torch nor vLLM (calling :func:`use_pil_image_processors`
imports transformers and, for the LFM2-VL twin, torch); reference venvs call it before importing
their library.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import logging
import sys
import types

logger = logging.getLogger(__name__)

LFM2_VL_TWIN = "vllm_factory.heads.colpali.image_processing_lfm2_vl"

# torchvision-only module -> (its twin: transformers' PIL module or ours, {name there: name here}).
PIL_TWINS: dict[str, tuple[str, dict[str, str]]] = {
    "transformers.models.qwen2_vl.image_processing_qwen2_vl": (
        "transformers.models.qwen2_vl.image_processing_pil_qwen2_vl",
        {"Qwen2VLImageProcessor": "Qwen2VLImageProcessorPil"},
    ),
    "transformers.models.lfm2_vl.image_processing_lfm2_vl": (
        LFM2_VL_TWIN,
        {"Lfm2VlImageProcessor": "Lfm2VlImageProcessor"},
    ),
    # The module's name before transformers 5.x renamed its torchvision processors.
    "transformers.models.lfm2_vl.image_processing_lfm2_vl_fast": (
        LFM2_VL_TWIN,
        {"Lfm2VlImageProcessor": "Lfm2VlImageProcessor",
         "Lfm2VlImageProcessorFast": "Lfm2VlImageProcessor"},
    ),
}  # fmt: skip

# Module registered above -> twin classes shown on ``transformers`` and on that module's package,
# where transformers' auto classes find a processor by its saved class name (without
# torchvision they find a placeholder there).
TWIN_CLASSES: dict[str, tuple[str, ...]] = {
    "transformers.models.lfm2_vl.image_processing_lfm2_vl": ("Lfm2VlImageProcessor",),
}


# Defining module -> class names it defines, exposed where transformers' lazy modules list them.
VIDEO_CLASSES: dict[str, tuple[str, ...]] = {
    "transformers.video_processing_utils": ("BaseVideoProcessor", "VideoProcessorMixin"),
    "transformers.models.auto.video_processing_auto": (
        "AutoVideoProcessor",
        "VIDEO_PROCESSOR_MAPPING",
    ),
    "transformers.models.qwen3_vl.video_processing_qwen3_vl": ("Qwen3VLVideoProcessor",),
}


@functools.cache
def torchvision_usable() -> bool:
    """Whether ``import torchvision`` works (installed and loadable next to this torch)."""
    if importlib.util.find_spec("torchvision") is None:
        return False
    try:
        importlib.import_module("torchvision")
    except Exception as error:  # noqa: BLE001 - a CUDA build beside a CPU torch: RuntimeError
        logger.info("torchvision is installed but does not load (%s)", error)
        return False
    return True


def use_pil_image_processors() -> bool:
    """Without a usable torchvision, register each module of :data:`PIL_TWINS` as its twin
    (only where nothing imported the real one yet) and show :data:`TWIN_CLASSES` and the video
    classes. True when the twins are in use."""
    if torchvision_usable():
        return False
    for name, (twin_name, renames) in PIL_TWINS.items():
        if name in sys.modules:
            continue
        twin = importlib.import_module(twin_name)
        module = types.ModuleType(name, twin.__doc__)
        module.__dict__.update(
            {key: value for key, value in vars(twin).items() if not key.startswith("__")}
        )
        for torchvision_name, pil_name in renames.items():
            setattr(module, torchvision_name, getattr(twin, pil_name))
        module.__all__ = sorted(renames)
        sys.modules[name] = module
        # Also an attribute of its package, as an imported submodule is: ``from package import
        # module`` asks the package first (transformers' lazy package would raise there).
        parent, _, child = name.rpartition(".")
        setattr(importlib.import_module(parent), child, module)
    _expose_classes(VIDEO_CLASSES)
    _expose_classes(TWIN_CLASSES)
    return True


def _expose_classes(classes: dict[str, tuple[str, ...]]) -> None:
    """Each class of ``classes`` (defining module -> names) on ``transformers`` and on its
    model's (or the auto) package, the public names through which transformers looks them up."""
    import transformers

    for defining, names in classes.items():
        module = importlib.import_module(defining)
        package = importlib.import_module(defining.rpartition(".")[0])
        for name in names:
            value = getattr(module, name, None)
            if value is None:  # not in this transformers version (VideoProcessorMixin: 5.19+)
                continue
            for public in {transformers, package}:
                if public.__dict__.get(name) is not value:
                    setattr(public, name, value)
