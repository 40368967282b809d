"""Reading PyLate's and sentence-transformers' layouts, and refusing what cannot be reproduced
(each refusal names the file and key)."""

import json
import string

import pytest
from vllm_factory.core.checkpoint import CheckpointFiles
from vllm_factory.heads.colbert.settings import (
    PYLATE,
    SENTENCE_TRANSFORMERS,
    UnsupportedColBERTConfig,
    read_colbert_settings,
)

DENSE = {"in_features": 8, "out_features": 4, "bias": False,
         "activation_function": "torch.nn.modules.linear.Identity"}  # fmt: skip
ST_MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.base.modules.transformer.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Dense", "type": "sentence_transformers.base.modules.dense.Dense"},
    {"idx": 2, "name": "2", "path": "2_MultiVectorMask",
     "type": "sentence_transformers.multi_vector_encoder.modules.multi_vector_mask.MultiVectorMask"},
    {"idx": 3, "name": "3", "path": "3_Normalize", "type": "sentence_transformers.base.modules.normalize.Normalize"},
]  # fmt: skip


def write(folder, files: dict) -> CheckpointFiles:
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content if isinstance(content, str) else json.dumps(content))
    return CheckpointFiles(str(folder))


def st_checkpoint(folder, st=None, transformer=None, mask=None, modules=ST_MODULES, dense=DENSE):
    return write(folder, {
        "config_sentence_transformers.json": {"model_type": "MultiVectorEncoder",
                                              "prompts": {"query": "", "document": ""}, **(st or {})},
        "modules.json": modules,
        "sentence_bert_config.json": {"transformer_task": "feature-extraction",
                                      "module_output_name": "token_embeddings", **(transformer or {})},
        "1_Dense/config.json": {**dense, "module_input_name": "token_embeddings"},
        "1_Dense/model.safetensors": "",
        "2_MultiVectorMask/config.json": {"skiplist_words": [], "skiplist_tasks": ["document"],
                                          "keep_only_token_ids": None, **(mask or {})},
        "3_Normalize/config.json": {},
    })  # fmt: skip


def test_pylate_layout_keys_and_defaults(tmp_path):
    files = write(tmp_path, {
        "config_sentence_transformers.json": {"model_type": "ColBERT", "query_length": 16,
                                              "document_prefix": "[D] ", "prompts": {"query": ""}},
        "modules.json": [{"path": "1_Dense", "type": "pylate.models.Dense.Dense"}],
        "1_Dense/config.json": DENSE, "1_Dense/model.safetensors": "",
    })  # fmt: skip
    settings = read_colbert_settings(files)
    assert settings.layout == PYLATE and settings.query_prefix == "[Q] "
    assert settings.query_length == settings.expansion_length == 16
    assert settings.do_query_expansion and settings.hides_expansion_keys
    assert settings.skiplist_words == tuple(string.punctuation)
    assert settings.skiplist_tasks == ("document",) and not settings.skiplist_drops_unknown


def test_sentence_transformers_native_layout(tmp_path):
    settings = read_colbert_settings(st_checkpoint(tmp_path))
    assert settings.layout == SENTENCE_TRANSFORMERS
    assert (settings.query_prefix, settings.query_prompt, settings.document_prompt) == ("", "", "")
    assert not settings.do_query_expansion and not settings.hides_expansion_keys
    assert settings.query_length is None and settings.document_length is None
    assert settings.skiplist_words == () and settings.skiplist_drops_unknown
    assert [d.out_features for d in settings.dense] == [4]


def test_sentence_transformers_custom_layout(tmp_path):
    settings = read_colbert_settings(st_checkpoint(
        tmp_path,
        st={"prompts": {"query": "q: ", "passage": "p: "}},
        transformer={"query_length": 32, "document_length": 64,
                     "query_expansion": {"strategy": "min", "length": 24, "attend": True}},
        mask={"skiplist_words": ["."], "skiplist_tasks": ["query", "document"]},
    ))  # fmt: skip
    assert (settings.query_prompt, settings.document_prompt) == ("q: ", "p: ")
    assert (settings.query_length, settings.document_length) == (32, 64)
    assert (settings.expansion_strategy, settings.expansion_length) == ("min", 24)
    assert settings.attend_to_expansion_tokens and not settings.hides_expansion_keys
    assert settings.skiplist_tasks == ("query", "document")


def test_default_prompt_name_applies_when_no_task_prompt(tmp_path):
    st = {"prompts": {"search": "s: "}, "default_prompt_name": "search"}
    settings = read_colbert_settings(st_checkpoint(tmp_path, st=st))
    assert settings.query_prompt == settings.document_prompt == "s: "


REFUSALS = [
    ({"mask": {"keep_only_token_ids": [5]}}, "2_MultiVectorMask/config.json: keep_only_token_ids"),
    ({"mask": {"skiplist_tasks": ["image"]}}, "skiplist_tasks"),
    ({"transformer": {"processing_kwargs": {"text": {"max_length": 8}}}}, "sentence_bert_config.json: processing_kwargs"),
    ({"transformer": {"query_expansion": {"strategy": "fixed", "length": 8, "token": "[X]"}}}, "query_expansion.token"),
    ({"transformer": {"query_expansion": {"strategy": "grow", "length": 8}}}, "query_expansion.strategy"),
    ({"transformer": {"do_lower_case": True}}, "do_lower_case"),
    ({"transformer": {"modality_config": {"image": {}}}}, "modality_config"),
    ({"st": {"similarity_fn_name": "cosine"}}, "similarity_fn_name"),
    ({"modules": ST_MODULES[:3]}, "modules.json: Normalize"),
    ({"modules": [*ST_MODULES, {"path": "4", "type": "x.TokenPooling"}]}, "modules.json: x.TokenPooling"),
    ({"dense": {**DENSE, "activation_function": "torch.nn.Tanh"}}, "1_Dense/config.json: activation_function"),
    ({"dense": {**DENSE, "use_residual": True}}, "use_residual"),
]  # fmt: skip


@pytest.mark.parametrize("changes, named", REFUSALS)
def test_what_cannot_be_reproduced_is_refused_naming_file_and_key(tmp_path, changes, named):
    with pytest.raises(UnsupportedColBERTConfig, match=named.replace(".", r"\.")):
        read_colbert_settings(st_checkpoint(tmp_path, **changes))


def test_query_expansion_needs_the_mask_module(tmp_path):
    modules = [m for m in ST_MODULES if "MultiVectorMask" not in m["type"]]
    transformer = {"query_expansion": {"strategy": "fixed", "length": 8}}
    with pytest.raises(UnsupportedColBERTConfig, match="MultiVectorMask"):
        read_colbert_settings(st_checkpoint(tmp_path, modules=modules, transformer=transformer))
    assert (
        read_colbert_settings(st_checkpoint(tmp_path / "b", modules=modules)).skiplist_words == ()
    )


def test_unknown_model_type_is_refused(tmp_path):
    files = write(tmp_path, {"config_sentence_transformers.json": {"model_type": "SparseEncoder"}})
    with pytest.raises(UnsupportedColBERTConfig, match="model_type"):
        read_colbert_settings(files)
