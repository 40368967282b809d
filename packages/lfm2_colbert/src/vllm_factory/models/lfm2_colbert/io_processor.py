"""``lfm2_colbert_io``: PyLate-exact ColBERT request handling (shared ColBERT package).

LFM2's tokenizer prepends ``<|startoftext|>`` and appends nothing; it has no mask token, so
PyLate pads queries with EOS. The shared ``ColBERTIOProcessor`` builds exactly that (prefix
after the first token, expansion with mask -> EOS -> pad).
"""

from vllm_factory.heads.colbert.io_processor import ColBERTIOProcessor


class Lfm2ColBERTIOProcessor(ColBERTIOProcessor):
    def setup(self) -> None:
        super().setup()
        if self.settings.do_query_expansion and self.tokenizer.padding_side != "right":
            # PyLate would pad queries on the left and put the prefix after the first pad.
            raise ValueError(
                f"{self.checkpoint.model}: tokenizer padding_side "
                f"{self.tokenizer.padding_side!r} is not supported with query expansion"
            )
