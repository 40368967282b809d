"""One glinker entity-linking pipeline run (runs in the glinker venv), in process or served.

    python glinker_pipeline.py --checkpoint DIR --inputs inputs.json --out result.json
    python glinker_pipeline.py --checkpoint DIR --url http://127.0.0.1:8000 --model NAME ...

The pipeline is glinker's own ``ConfigBuilder`` one: L1 GLiNER mentions (``inputs['l1_labels']``)
-> L2 dict layer loaded with ``inputs['entities']`` -> L3 GLiNER linking with the
``inputs['template']`` labels -> L4 GLiNER reranking (candidates in chunks of
``l4_max_labels``) -> L0 aggregation. With ``--url`` the L1, L3 and L4 nodes become
``vllm_factory.glinker``'s served processors (the same configs plus ``url``); without it
gliner loads ``--checkpoint`` in this process. The output holds every layer's result.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

SERVED = {
    "l1": ("l1_gliner_vllm", "model"),
    "l3": ("l3_vllm", "model_name"),
    "l4": ("l4_vllm", "model_name"),
}


def build_config(inputs: dict, checkpoint: str, with_l4: bool = True) -> dict:
    from glinker import ConfigBuilder

    builder = ConfigBuilder(name="vllm-factory-glinker")
    builder.l1.gliner(
        model=checkpoint, labels=inputs["l1_labels"], threshold=inputs["l1_threshold"],
        max_length=inputs["max_length"],
    )  # fmt: skip
    builder.l2.add("dict", priority=0)
    builder.l3.configure(
        model=checkpoint, threshold=inputs["l3_threshold"], max_length=inputs["max_length"]
    )
    if with_l4:
        builder.l4.configure(
            model=checkpoint, threshold=inputs["l4_threshold"],
            max_labels=inputs["l4_max_labels"], max_length=inputs["max_length"],
        )  # fmt: skip
    builder.set_schema_template(inputs["template"])
    return builder.get_config()


def serve(config: dict, url: str, model: str) -> dict:
    """The same pipeline with L1 and L3 served: processor renamed, ``url`` and the model name."""
    from vllm_factory.glinker import register

    register()

    for node in config["nodes"]:
        if node["id"] in SERVED:
            processor, key = SERVED[node["id"]]
            node["processor"] = processor
            node["config"] = {**node["config"], "url": url, key: model}
    return config


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--inputs", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--url")
    ap.add_argument("--model")
    args = ap.parse_args()
    from glinker import ProcessorFactory

    inputs = json.loads(args.inputs.read_text(encoding="utf-8"))
    config = build_config(inputs, args.checkpoint)
    if args.url:
        config = serve(config, args.url, args.model)
    executor = ProcessorFactory.create_from_dict(config)
    executor.load_entities(inputs["entities"])
    started = time.perf_counter()
    context = executor.execute({"texts": inputs["texts"]})
    seconds = time.perf_counter() - started
    outputs = {}
    for key in ("l1_result", "l2_result", "l3_result", "l4_result", "l0_result"):
        value = context.get(key)
        outputs[key] = value.model_dump(mode="json") if hasattr(value, "model_dump") else value
    processors = {node["id"]: node["processor"] for node in config["nodes"]}
    args.out.write_text(
        json.dumps({"processors": processors, "seconds": seconds, "outputs": outputs}),
        encoding="utf-8",
    )


if __name__ == "__main__":
    main()
