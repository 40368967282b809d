"""``colqwen3_io``: colpali-engine's ``ColQwen3Processor`` prompts in the shared ColPali
request handling."""

from vllm_factory.heads.colpali.io_processor import ColPaliIOProcessor
from vllm_factory.models.colqwen3 import ARCHITECTURE


class ColQwen3IOProcessor(ColPaliIOProcessor):
    architecture = ARCHITECTURE

    # process_queries: no prefix, ten <|endoftext|> appended; process_texts: the text as is.
    query_suffix = "<|endoftext|>" * 10
    # process_images: one chat turn around the image, the processor expanding <|image_pad|>.
    image_prompt = (
        "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>"
        "Describe the image.<|im_end|><|endoftext|>"
    )
