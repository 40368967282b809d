"""vLLM's start-up passes (dummy pooler runs at the shapes a CUDA engine uses, then requests
that carry no per-request data) through the model, adapter and sentence-transformers head."""

from vllm_factory.testing.startup import check_report, startup_report

ARCHITECTURE = "EmbeddingGemmaForEmbedding"


def test_engine_start_up_passes(checkpoint, reference):
    report = startup_report(
        checkpoint, io_processor_plugin="embeddinggemma_io",
        hf_overrides={"architectures": [ARCHITECTURE]},
    )  # fmt: skip
    check_report(report, (reference.meta["dimension"],))
