"""``collfm2_io``: sauerkrautlm-colpali's ``ColLFM2Processor`` prompts in the shared ColPali
request handling."""

from vllm_factory.heads.colpali.io_processor import ColPaliIOProcessor
from vllm_factory.models.collfm2 import ARCHITECTURE


class ColLFM2IOProcessor(ColPaliIOProcessor):
    architecture = ARCHITECTURE

    # process_queries is process_texts: the text as the tokenizer frames it (LFM2's
    # <|startoftext|> first), no prefix, no augmentation tokens; is_query changes nothing.
    # process_images: one chat turn around the image, through Lfm2VlProcessor, which expands
    # <image> into the image's tiles and tokenizes without special tokens (no <|startoftext|>).
    image_prompt = "<|im_start|>user\n<image>Describe the image.<|im_end|>"

    def setup(self) -> None:
        super().setup()
        self.image_prompt_ids = self.tokenizer(self.image_prompt, add_special_tokens=False)[
            "input_ids"
        ]
