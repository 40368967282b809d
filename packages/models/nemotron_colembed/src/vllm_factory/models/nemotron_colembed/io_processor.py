"""``nemotron_colembed_io``: NVIDIA's Nemotron ColEmbed prompts (its remote processor's
``process_queries`` / ``process_documents``) in the shared ColPali request handling.

Prompts come from the checkpoint itself: its chat template (one user turn, then the generation
prompt) and the settings its processor saved in ``processor_config.json`` (``query_prefix``,
``passage_prefix``, ``q_max_length``, ``p_max_length``; the remote processor's defaults where a
key is missing):

- query: ``"Query: " + query_prefix + " " + text`` in the template, truncated to
  ``q_max_length`` tokens (as the remote processor truncates);
- image document: the image, then ``passage_prefix + " "`` (the remote ``forward_images``: an
  empty document text);
- text document (no path in the remote code): ``passage_prefix + " " + text`` in the
  template, truncated to ``p_max_length`` tokens.
"""

from __future__ import annotations

import logging

from vllm_factory.core.tokens import tokenize_cut
from vllm_factory.heads.colpali.io_processor import ColPaliIOProcessor
from vllm_factory.models.nemotron_colembed import ARCHITECTURE
from vllm_factory.models.nemotron_colembed.prompts import ChatFrame, ProcessorSettings

logger = logging.getLogger(__name__)


class NemotronColEmbedIOProcessor(ColPaliIOProcessor):
    architecture = ARCHITECTURE

    def setup(self) -> None:
        self.settings = ProcessorSettings.from_saved(self.checkpoint.json("processor_config.json"))
        super().setup()  # the tokenizer, then image_prompt_text()
        self.text_frame = ChatFrame(self.tokenizer, [])
        logger.info(
            "%s: query prompt %r, image prompt %r, q_max_length %d, p_max_length %d",
            self.checkpoint.model, self.text_frame(self.settings.query("…")),
            self.image_prompt_text(), self.settings.q_max_length, self.settings.p_max_length,
        )  # fmt: skip

    def image_prompt_text(self) -> str:
        if not getattr(self.tokenizer, "chat_template", None):
            raise ValueError(
                f"{self.checkpoint.model}: the tokenizer has no chat template (Nemotron "
                "ColEmbed's prompts are built with it)"
            )
        return ChatFrame(self.tokenizer, [{"type": "image"}])(self.settings.passage(""))

    def text_ids(self, text: str, is_query: bool, field: str = "data.text") -> list[int]:
        """NVIDIA's processor truncates at its query / passage length; the text is tokenized
        only as far as that reads (``tokens``)."""
        settings = self.settings
        frame = settings.query if is_query else settings.passage
        limit = settings.q_max_length if is_query else settings.p_max_length
        return tokenize_cut(
            lambda part: self.tokenizer(
                self.text_frame(frame(part)), truncation=True, max_length=limit
            )["input_ids"],
            text,
            limit,
        )
