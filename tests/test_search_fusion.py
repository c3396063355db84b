"""Each model's fusion: its relevance calibration and the lexical weight measured for it."""

from ireneo import Memory, relevance, search


def test_a_memory_ranks_with_its_model_s_fusion(tmp_path):
    for model in ("minilm-l6-v2-q8", "e5-small-q8"):
        with Memory(tmp_path / model, model=model) as memory:
            assert memory.fusion.lift == relevance.LIFTS[model]
            expected = search.LEXICAL_WEIGHTS.get(model, search.Fusion().lexical_weight)
            assert memory.fusion.lexical_weight == expected
    assert search.Fusion.for_model("e5-small-q8").lexical_weight < search.Fusion().lexical_weight
    assert search.Fusion.for_model(None) == search.Fusion()
