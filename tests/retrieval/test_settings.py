"""Search settings: seed 003 defaults, bounds, kb.yaml's ``search:`` section."""

from __future__ import annotations

import pytest

from corpus_pipeline.errors import ConfigError
from corpus_pipeline.kbconfig import KBConfig, SearchConfig, kb_from_config
from corpus_pipeline.retrieval.settings import SearchSettings
from corpus_pipeline.versioning import strategy_version


def test_the_defaults_are_the_numbers_of_seed_003():
    assert SearchSettings().to_dict() == {
        "vector_top_k": 8,
        "keyword_top_k": 8,
        "min_vector_similarity": 0.45,
        "keyword_relative_score_floor": 0.35,
        "rrf_k": 60,
        "candidate_top_k": 10,
        "final_top_k": 5,
        "extra_hit_boost": 0.12,
        "max_extra_hits": 3,
        "multi_channel_boost": 0.10,
        "parent_evidence_max_chars": 2200,
        "total_evidence_max_chars": 5200,
        "hit_preview_chars": 140,
        "max_unknown_token_share": 0.25,  # ours, not the seed's: see retrieval.settings
    }


def test_kb_yaml_search_section_has_the_same_keys_and_defaults():
    assert SearchConfig().model_dump() == SearchSettings().to_dict()
    assert SearchSettings.from_mapping(KBConfig.model_validate({"search": {"rrf_k": 10}}).search).rrf_k == 10


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"search": {"rrf_k": -1}}, "search.rrf_k"),
        ({"search": {"min_vector_similarity": 1.5}}, "search.min_vector_similarity"),
        ({"search": {"final_top_k": 0}}, "search.final_top_k"),
        ({"search": {"vector_topk": 4}}, "extra"),
    ],
)
def test_out_of_range_or_unknown_search_keys_are_refused(raw, message):
    with pytest.raises(Exception, match=message):
        KBConfig.model_validate(raw)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"keyword_relative_score_floor": 1.2},
            r"search.keyword_relative_score_floor = 1.2 is out of range: allowed 0.0..1.0",
        ),
        ({"final_top_k": 2.5}, r"search.final_top_k = 2.5: must be a whole number"),
        ({"vector_top_k": 0, "keyword_top_k": 0}, r"both 0"),
    ],
)
def test_library_settings_validate_themselves(changes, message):
    with pytest.raises(ConfigError, match=message):
        SearchSettings(**changes)


def test_search_settings_do_not_change_the_strategy_version(tmp_path):
    kb_dir = tmp_path / "kb"
    kb_dir.mkdir()
    plain = kb_from_config(kb_dir, KBConfig())
    tuned = kb_from_config(kb_dir, KBConfig.model_validate({"search": {"final_top_k": 9, "rrf_k": 20}}))
    assert strategy_version(plain) == strategy_version(tuned)
