from vllm_factory.testing import flops


def test_modernbert_window_caps_the_context_of_sliding_layers():
    config = {"hidden_size": 4, "intermediate_size": 8, "num_hidden_layers": 2,
              "global_attn_every_n_layers": 2, "local_attention": 2}  # fmt: skip
    # per token: 2 layers x (8*16 + 6*32) = 640; attention 4*4*(10 global + 3 local keys)
    assert flops.modernbert(config, 10) == 10 * (640 + 16 * 13)
    assert flops.encoder({**config, "model_type": "modernbert"}, 10) == 10 * (640 + 16 * 13)


def test_deberta_counts_both_relative_attention_kinds():
    config = {"hidden_size": 4, "intermediate_size": 8, "num_hidden_layers": 1,
              "position_buckets": 3, "pos_att_type": ["p2c", "c2p"]}  # fmt: skip
    plain = flops.deberta_v2({**config, "pos_att_type": []}, 5)
    assert plain == 5 * (8 * 16 + 4 * 32 + 4 * 4 * 5)
    # each kind: 2*h*(2*span) per token, and its 2*span relative keys projected once
    assert flops.deberta_v2(config, 5) == plain + 2 * (5 * 2 * 4 * 6 + 2 * 6 * 16)


def test_t5_gated_mlp_and_unknown_encoders():
    config = {"d_model": 4, "num_heads": 2, "d_kv": 3, "d_ff": 5, "num_layers": 1,
              "feed_forward_proj": "gated-gelu"}  # fmt: skip
    assert flops.t5_encoder(config, 2) == 2 * (8 * 4 * 6 + 3 * 2 * 4 * 5 + 4 * 6 * 2)
    assert flops.encoder({"model_type": "llama"}, 2) is None


def test_gliner_head_is_dominated_by_the_span_mlp_in_gliners_formulation():
    config = {"hidden_size": 512, "max_width": 12, "num_rnn_layers": 1,
              "encoder_config": {"hidden_size": 768}}  # fmt: skip
    total = flops.gliner_span_head_unfolded(config, tokens=512, words=360, labels=5)
    spans = 360 * 12 * 24 * 512 * 512
    assert spans < total < 1.5 * spans


def test_gliner_head_as_computed_per_word_not_per_span():
    g, k, words, labels, tokens = 512, 12, 360, 5, 512
    config = {"hidden_size": g, "max_width": k, "num_rnn_layers": 1,
              "encoder_config": {"hidden_size": 768}}  # fmt: skip
    expected = (
        2 * 768 * g * tokens  # projection to the head's width
        + labels * 24 * g * g  # label MLP and the folded last layer
        + words * (12 * g * g + 32 * g * g + 16 * g * g)  # BiLSTM, endpoint MLPs, span table
        + words * k * 8 * g * labels  # every span's hidden layer against every label
    )
    assert flops.gliner_span_head(config, tokens, words, labels) == expected
    assert 3 * expected < flops.gliner_span_head_unfolded(config, tokens, words, labels)
