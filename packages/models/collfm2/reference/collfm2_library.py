"""sauerkrautlm-colpali 0.1.0's ``ColLFM2`` as the reference runs it (imported by
``build_checkpoint.py`` and, as the kit encoder's ``--model-class``, by ``colpali_encode.py``;
both in the ColLFM2 reference venv).

Two things the library fixes in code are set here, nothing else:

- ``ColLFM2.__init__`` loads the LFM2-VL backbone with ``attn_implementation="flash_attention_2"``
  and ``torch_dtype=torch.bfloat16``; on a CPU there is no flash-attention, so the backbone is
  loaded with ``sdpa`` and the dtype asked for (:func:`backbone_loading`);
- ``ColLFM2.save_pretrained`` writes the backbone (transformers' ``Lfm2VlForConditionalGeneration``
  layout: ``config.json`` of model_type ``lfm2_vl``, ``model.safetensors``) and the projection
  into ``collfm2_projection.pt`` (``{"custom_text_proj": state_dict, "config": {"dim", ...}}``),
  but ``ColLFM2.from_pretrained`` reads that file only for a ``config.json`` of model_type
  ``collfm2``; for its own saved directory it re-initialises the projection at random. So the
  projection is read back from ``collfm2_projection.pt`` as the library's own fallback branch does
  (``custom_text_proj.load_state_dict``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from sauerkrautlm_colpali.models.lfm2.collfm2 import modeling_collfm2
from sauerkrautlm_colpali.models.lfm2.collfm2.modeling_collfm2 import ColLFM2

PROJECTION_FILE = "collfm2_projection.pt"


@contextlib.contextmanager
def backbone_loading(dtype: torch.dtype) -> Iterator[None]:
    """While active, ``ColLFM2`` loads its backbone with SDPA attention in ``dtype``."""
    auto = modeling_collfm2.AutoModelForImageTextToText

    class _Auto:
        @staticmethod
        def from_pretrained(name: Any, *args: Any, **kwargs: Any) -> Any:
            kwargs.pop("torch_dtype", None)
            kwargs.update(attn_implementation="sdpa", dtype=dtype)
            return auto.from_pretrained(name, *args, **kwargs)

    modeling_collfm2.AutoModelForImageTextToText = _Auto
    try:
        yield
    finally:
        modeling_collfm2.AutoModelForImageTextToText = auto


class ColLFM2Reference:
    """``from_pretrained(DIR, dtype=...)`` -> the library's ``ColLFM2`` for a directory its
    ``save_pretrained`` wrote, in ``dtype`` (the kit encoder's model class)."""

    @staticmethod
    def from_pretrained(path: str | Path, dtype: torch.dtype = torch.float32) -> ColLFM2:
        with backbone_loading(dtype):
            model = ColLFM2.from_pretrained(str(path))
        model.to(dtype)  # the library casts its projection to bfloat16 in __init__
        saved = torch.load(Path(path) / PROJECTION_FILE, map_location="cpu", weights_only=True)
        model.custom_text_proj.load_state_dict(saved["custom_text_proj"])
        return model.eval()
