"""The remote processor's prompts from a checkpoint's settings and chat template (no vLLM)."""

import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
from vllm_factory.heads.colpali.config_format import merged
from vllm_factory.models.nemotron_colembed import COLPALI_CONFIG_UPDATE
from vllm_factory.models.nemotron_colembed.prompts import ChatFrame, ProcessorSettings

# Qwen3-VL's chat format for one user turn of text and image parts.
TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% for p in m['content'] %}{% if p['type'] == 'image' %}<|vision_start|><|image_pad|>"
    "<|vision_end|>{% else %}{{ p['text'] }}{% endif %}{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def tokenizer(template: str) -> PreTrainedTokenizerFast:
    words = ["[UNK]", "<|im_start|>", "<|im_end|>", "user", "assistant", "Query:", "query:"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")
    fast.chat_template = template
    return fast


def test_settings_default_to_the_remote_processor_and_read_the_saved_ones():
    assert ProcessorSettings.from_saved(None) == ProcessorSettings(512, 4096, "query:", "passage:")
    saved = {"q_max_length": 64, "query_prefix": "", "passage_prefix": None, "image_processor": {}}
    settings = ProcessorSettings.from_saved(saved)
    assert (settings.q_max_length, settings.p_max_length) == (64, 4096)
    assert settings.query("what?") == "Query: what?"
    assert settings.passage("") == "passage: "
    assert ProcessorSettings().query("  a b ") == "Query: query:   a b "


@pytest.mark.parametrize("text", ["what is it?", "", "{{ not jinja }}", "  spaced  ", "é 中"])
def test_chat_frame_is_the_template_rendered_around_the_text(text):
    tok = tokenizer(TEMPLATE)
    frame = ChatFrame(tok, [])
    assert frame.frame is not None
    assert frame(text) == frame.render(text)
    assert frame(text) == f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
    image = ChatFrame(tok, [{"type": "image"}])
    assert image(text) == (
        f"<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>{text}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_chat_frame_renders_each_text_where_the_template_changes_it():
    tok = tokenizer(TEMPLATE.replace("{{ p['text'] }}", "{{ p['text'] | trim }}"))
    frame = ChatFrame(tok, [])
    assert frame("  spaced  ") == "<|im_start|>user\nspaced<|im_end|>\n<|im_start|>assistant\n"


def test_served_config_is_a_bidirectional_qwen3_vl_config_without_remote_code():
    config = {"model_type": "qwen3_vl_nemotron_embed", "pooling": "colbert",
              "auto_map": {"AutoModel": "x.Y"}, "text_config": {"hidden_size": 64}}  # fmt: skip
    served = merged(config, COLPALI_CONFIG_UPDATE)
    assert served == {"model_type": "qwen3_vl", "pooling": "colbert", "is_causal": False,
                      "text_config": {"hidden_size": 64, "is_causal": False}}  # fmt: skip
