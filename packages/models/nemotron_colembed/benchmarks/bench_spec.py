"""Nemotron ColEmbed's benchmark spec for ``nox -s bench -- --plugin nemotron_colembed
[--workload queries]``: the ColPali family's spec (:mod:`vllm_factory.testing.colpali.bench`:
generated document pages or text queries, the plugin and vLLM's native model side by side, the
reference in process) with what is Nemotron's own: prompts from the checkpoint's chat template
and processor settings, as the plugin builds them, and no projection.

- Checkpoint: ``reference/build_checkpoint.py --size cpu`` on CPU and ``--size bench`` with
  ``--device cuda``: the kit's Qwen3-VL benchmark sizes (``qwen3_vl_tiny.CPU`` / ``BENCH``, the
  latter Qwen3-VL-2B's shapes, as colqwen3's bench, so the two compare), random weights,
  bidirectional text attention, final norm unapplied, 2048-wide vectors at the bench size.
- Native: vLLM's ``Qwen3VLNemotronEmbedModel``, the checkpoint's own architecture served
  without the plugin. vLLM runs it as its ``ColQwen3Model``: causal attention and the final norm
  applied, so its vectors are not the model's (recorded as ``min_cosine_vs_plugin``, not
  expected to match); the work per input is the same (the same prompts through a chat template,
  the same image tokens), so its timings are the bar. It does not start on NVIDIA's layout:
  vLLM's processor for it loads a video processor, which NVIDIA's checkpoints do not hold
  (``OSError: Can't load video processor``); native serves a copy of the checkpoint (links to
  its files) with a ``video_preprocessor_config.json`` of the image processor's grid, the one
  the plugin makes in memory (:func:`native_checkpoint`).
- Reference: ``nemotron_hf.py`` (transformers' Qwen3-VL run as NVIDIA's remote code runs it) in
  the ColPali reference venv, ``process_images`` / ``process_queries`` then the model, batch
  size 1 and the sweep.
- FLOPs: :func:`vllm_factory.testing.colpali.bench.qwen3_vl_flops` without a projection
  (bidirectional attention over n tokens costs ``4 q d n^2`` per layer, against the causal
  ``4 q d n (n + 1) / 2`` counted there: under 2 % of a page's FLOPs at the bench size).
"""

from __future__ import annotations

import json
from pathlib import Path

from vllm_factory.models.nemotron_colembed.prompts import SENTINEL, ChatFrame, ProcessorSettings
from vllm_factory.testing.bench import BenchConfig, ServerSpec
from vllm_factory.testing.colpali.bench import ColPaliBenchSpec, qwen3_vl_flops

IMAGE_PLACEHOLDER = "<|vision_start|><|image_pad|><|vision_end|>"


def processor_settings(checkpoint: Path) -> ProcessorSettings:
    path = checkpoint / "processor_config.json"
    return ProcessorSettings.from_saved(json.loads(path.read_text(encoding="utf-8")))


def native_checkpoint(checkpoint: Path, folder: Path) -> Path:
    """``folder``: links to every file of ``checkpoint`` plus the video processor vLLM's native
    model needs (the plugin's in-memory stand-in, saved)."""
    from vllm_factory.heads.colpali.image_processing import use_pil_image_processors

    use_pil_image_processors()
    from transformers import AutoImageProcessor
    from vllm_factory.models.nemotron_colembed.processing import video_processor_like

    folder.mkdir(parents=True, exist_ok=True)
    for path in checkpoint.iterdir():
        link = folder / path.name
        if not link.exists():
            link.symlink_to(path.resolve())
    images = AutoImageProcessor.from_pretrained(str(checkpoint), trust_remote_code=False)
    video_processor_like(images).save_pretrained(str(folder))
    return folder


class NemotronBenchSpec(ColPaliBenchSpec):
    """Prompts read from the checkpoint once it is known (its chat template and settings)."""

    def checkpoint(self, config: BenchConfig, max_tokens: int) -> Path:
        path = super().checkpoint(config, max_tokens)
        self.use_prompts_of(path)
        return path

    def use_prompts_of(self, checkpoint: Path) -> None:
        """The plugin's prompts for ``checkpoint``: the image prompt, and the query prompt as
        prefix + text + suffix (the chat template copies the text verbatim)."""
        tokenizer = self._tokenizer(checkpoint)
        settings = processor_settings(checkpoint)
        self.image_prompt = ChatFrame(tokenizer, [{"type": "image"}])(settings.passage(""))
        framed = ChatFrame(tokenizer, [])(settings.query(SENTINEL))
        self.query_prefix, found, self.query_suffix = framed.partition(SENTINEL)
        if not found:
            raise ValueError(f"{checkpoint}: the chat template does not copy the query text")

    def servers(self, checkpoint: Path) -> list[ServerSpec]:
        out = super().servers(checkpoint)
        for server in out:
            if server.name == "native":
                server.checkpoint = native_checkpoint(checkpoint, checkpoint.parent / "native")
        return out


SPEC = NemotronBenchSpec(
    __file__,
    image_prompt=IMAGE_PLACEHOLDER,  # replaced by the checkpoint's own (use_prompts_of)
    image_placeholder=IMAGE_PLACEHOLDER,
    native_architecture="Qwen3VLNemotronEmbedModel",
    native_matches=False,
    flops=qwen3_vl_flops,
    reference_library="transformers (nemotron_hf.py)",
)
