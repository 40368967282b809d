"""gliner2's ``extract_long`` outputs for the GLiNER2 long-text cases (runs in the gliner2 venv).

    python gliner2_long.py --checkpoint DIR --cases long_cases.json --out long-results.json \
        [--bf16-out long-results-bf16.json]

A case is ``{"id", "text", "request"}`` as in ``gliner2_encode.py``, plus ``"long"``: true for
a text read with ``extract_long`` (the request's ``chunk_size`` / ``chunk_overlap``, else the
library's defaults), false for one read with ``extract`` (a text that fits the server whole).
The schema is built as the matching short-form call builds it (``extract_entities`` /
``classify_text`` / ``extract_json`` / ``extract_relations``), or from ``request["schema"]``
(``Schema.from_dict`` form, or a ``Schema().build()`` dict as it is). The JSON holds, per case
id, ``result`` (tuples as lists) and ``windows`` (how many windows the library read);
``--bf16-out`` the same for the library's own bf16 run (what that dtype changes).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import torch
from gliner2_encode import BUILD_KEYS, call_library, plain
from tiny_checkpoint import script_parser

WINDOW_OPTIONS = ("chunk_size", "chunk_overlap")


def long_schema(model, request: dict[str, Any]) -> Any:
    """The schema object ``extract_long`` gets for ``request``'s schema form."""
    from gliner2 import Schema

    forms = [k for k in ("schema", "entities", "classifications", "structures", "relations")
             if k in request]  # fmt: skip
    if len(forms) != 1:
        raise ValueError(f"exactly one of schema / a short form per request, got {forms}")
    form, value = forms[0], copy.deepcopy(request[forms[0]])
    if form == "schema":
        return value if BUILD_KEYS & value.keys() else Schema.from_dict(value)
    if form == "entities":
        return model.create_schema().entities(value)
    if form == "classifications":
        return model._classification_schema(value)
    if form == "structures":
        return model._json_schema(value)
    return model.create_schema().relations(value)


def run_long(model, text: str, request: dict[str, Any]) -> tuple[Any, int]:
    from gliner2.inference.chunking import split_text_into_chunks

    options = {"threshold": request.get("threshold", 0.5),
               "include_confidence": request.get("include_confidence", False),
               "include_spans": request.get("include_spans", False)}  # fmt: skip
    options.update({k: request[k] for k in WINDOW_OPTIONS if k in request})
    result = model.extract_long(text, long_schema(model, request), **options)
    size, overlap = options.get("chunk_size", 384), options.get("chunk_overlap", 64)
    return result, len(split_text_into_chunks(text, size, overlap))


def run_cases(model, cases: list[dict]) -> dict[str, Any]:
    types: set[str] = set()
    out: dict[str, Any] = {}
    for case in cases:
        request = case["request"]
        if case["long"]:
            result, windows = run_long(model, case["text"], request)
        else:
            short = {k: v for k, v in request.items() if k not in WINDOW_OPTIONS}
            result, windows = call_library(model, case["text"], short), 1
        out[case["id"]] = {"result": plain(result, types), "windows": windows}
    return out


def main() -> None:
    ap = script_parser(__doc__, "cases")
    ap.add_argument("--bf16-out", type=Path)
    args = ap.parse_args()
    from gliner2 import GLiNER2

    torch.manual_seed(0)
    model = GLiNER2.from_pretrained(str(args.checkpoint)).eval()
    assert next(model.parameters()).device.type == "cpu"
    model.sync_collapsed_decode = False
    cases = json.loads(args.cases.read_text(encoding="utf-8"))
    write(args.out, run_cases(model, cases))
    if args.bf16_out is not None:  # what bf16 changes in the library's own results
        write(args.bf16_out, run_cases(model.to(torch.bfloat16), cases))


def write(path: Path, out: dict[str, Any]) -> None:
    path.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
