"""``lfm2_colbert_io``: ColBERT request handling (shared ColBERT package).

LFM2's tokenizer prepends ``<|startoftext|>`` and appends nothing; it has no mask token, so
PyLate pads queries with EOS. The shared ``ColBERTIOProcessor`` builds exactly that (prefix
after the first token, expansion with mask -> EOS -> pad), and refuses a tokenizer that pads
(so expands) on the left.
"""

from vllm_factory.heads.colbert.io_processor import ColBERTIOProcessor
from vllm_factory.models.lfm2_colbert import ARCHITECTURE


class Lfm2ColBERTIOProcessor(ColBERTIOProcessor):
    """Nothing LFM2-specific beyond the shared ColBERT processing."""

    architecture = ARCHITECTURE
