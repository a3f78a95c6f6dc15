"""LLMClient over real HTTP: answers, the disk cache, every failure as ModelError, the key
never shown, settings from kb.yaml over the resource over the environment."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.openai_server import OpenAIServer, Reply

from corpus_pipeline.errors import ConfigError, ModelError
from corpus_pipeline.kbconfig import load_kb_config
from corpus_pipeline.llm import LLMConfig, llm_settings, open_llm
from llm.conftest import KEY, MakeClient

HELLO = [{"role": "user", "content": "hello"}]


def test_a_chat_answer_is_returned_with_its_usage_and_the_key_is_sent_not_shown(
    openai_server: OpenAIServer, make_client: MakeClient
) -> None:
    openai_server.queue(Reply.chat("hi there"))
    client = make_client(openai_server)
    result = client.chat(HELLO)
    assert (result.content, result.model, result.cached) == ("hi there", "llm-test", False)
    (call,) = openai_server.calls()
    assert call.model == "llm-test" and call.messages == HELLO and call.body["temperature"] == 0
    assert "max_tokens" not in call.body and "response_format" not in call.body
    assert call.headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(client) and KEY not in repr(client.settings)
    assert client.usage.to_dict() == {
        "calls": 1,
        "cache_hits": 0,
        "prompt_tokens": 1,
        "completion_tokens": 1,
        "errors": 0,
        "skipped": 0,
    }


def test_a_repeated_question_is_answered_from_disk_without_a_call(
    openai_server: OpenAIServer, make_client: MakeClient, tmp_path: Path
) -> None:
    openai_server.queue(Reply.chat("first"), Reply.chat("second"))
    make_client(openai_server).chat(HELLO)
    again = make_client(openai_server)  # a new client (a new run), same cache folder
    result = again.chat(HELLO)
    assert (result.content, result.cached) == ("first", True)
    assert len(openai_server.calls()) == 1 and again.usage.cache_hits == 1 and again.usage.calls == 0
    # other parameters or another model are other questions
    assert again.chat(HELLO, max_tokens=50).content == "second"
    assert openai_server.calls()[-1].body["max_tokens"] == 50
    # the cache holds answers, never the key or the base URL
    stored = "".join(p.read_text() for p in (tmp_path / "cache" / "llm").rglob("*.json"))
    assert "first" in stored and KEY not in stored and "127.0.0.1" not in stored


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (Reply.error(500, "boom"), "InternalServerError"),
        (Reply.error(429, "slow down"), "RateLimitError"),
        (Reply.malformed(), "unreadable response"),
        (Reply.json({"choices": []}), "no message"),
        (Reply.json({"unexpected": True}), "no message"),
        (Reply.chat("late").after(3.0), "Timeout"),
    ],
    ids=["http-500", "http-429", "malformed-body", "no-choices", "not-a-completion", "timeout"],
)
def test_every_failure_is_a_model_error_and_is_not_cached(
    openai_server: OpenAIServer, make_client: MakeClient, reply: Reply, message: str
) -> None:
    openai_server.queue(reply, Reply.chat("recovered"))
    client = make_client(openai_server, timeout_s=1.0)
    with pytest.raises(ModelError, match=message) as err:
        client.chat(HELLO)
    assert KEY not in str(err.value)
    assert (client.usage.calls, client.usage.errors) == (1, 1)
    assert make_client(openai_server).chat(HELLO).content == "recovered"  # asked again: a failure is not cached


def test_an_error_message_echoing_the_key_is_masked(openai_server: OpenAIServer, make_client: MakeClient) -> None:
    openai_server.queue(Reply.error(401, f"Incorrect API key provided: {KEY}"))
    with pytest.raises(ModelError) as err:
        make_client(openai_server).chat(HELLO)
    assert KEY not in str(err.value) and "provided: ***" in str(err.value)  # the configured key, masked whole


def test_a_huge_answer_is_refused_and_the_refusal_is_cached(
    openai_server: OpenAIServer, make_client: MakeClient
) -> None:
    openai_server.queue(Reply.chat("x" * 5000))
    with pytest.raises(ModelError, match="5000 characters, over the limit of 1000"):
        make_client(openai_server, max_response_chars=1000).chat(HELLO)
    with pytest.raises(ModelError, match="over the limit"):
        make_client(openai_server, max_response_chars=1000).chat(HELLO)
    assert len(openai_server.calls()) == 1  # not bought twice


def test_a_model_that_keeps_failing_is_not_called_again(openai_server: OpenAIServer, make_client: MakeClient) -> None:
    openai_server.default = Reply.error(503)
    client = make_client(openai_server, max_consecutive_failures=2)
    results = client.chat_many([[{"role": "user", "content": str(i)}] for i in range(5)])
    assert all(isinstance(r, ModelError) for r in results)
    assert len(openai_server.calls()) == 2
    assert "skipped after 2 consecutive failed calls" in str(results[-1])
    assert (client.usage.calls, client.usage.errors, client.usage.skipped) == (2, 2, 3)


def test_chat_many_keeps_the_order_with_calls_in_flight_together(
    openai_server: OpenAIServer, make_client: MakeClient
) -> None:
    openai_server.handler = lambda req: Reply.chat("echo " + req.messages[0]["content"]).after(0.2)
    client = make_client(openai_server, max_concurrency=4)
    requests = [[{"role": "user", "content": str(i)}] for i in range(8)]
    import time

    t0 = time.monotonic()
    results = client.chat_many(requests)
    assert [r.content for r in results] == [f"echo {i}" for i in range(8)]  # type: ignore[union-attr]
    assert time.monotonic() - t0 < 1.2  # 8 x 0.2 s one by one would take 1.6 s


def test_identical_requests_in_one_batch_are_asked_once(openai_server: OpenAIServer, make_client: MakeClient) -> None:
    openai_server.handler = lambda req: Reply.chat("echo " + req.messages[0]["content"]).after(0.1)
    client = make_client(openai_server, max_concurrency=4)
    results = client.chat_many([[{"role": "user", "content": c}] for c in "abab"])
    assert [r.content for r in results] == ["echo a", "echo b", "echo a", "echo b"]  # type: ignore[union-attr]
    assert sorted(c.messages[0]["content"] for c in openai_server.calls()) == ["a", "b"]
    assert client.usage.calls == 2


def test_json_mode_asks_for_a_json_object(openai_server: OpenAIServer, make_client: MakeClient) -> None:
    openai_server.queue(Reply.chat('{"a": 1}'))
    assert json.loads(make_client(openai_server).chat(HELLO, json_object=True).content) == {"a": 1}
    assert openai_server.calls()[0].body["response_format"] == {"type": "json_object"}


# ------------------------------------------------------------------ settings


ENV = {
    "OPENAI_BASE_URL": "http://env/v1",
    "OPENAI_API_KEY": "k-env",
    "CORPUS_LLM_MODEL": "env-model",
    "MY_KEY": "k-mine",
}


@pytest.mark.parametrize(
    ("config", "resource", "expected"),
    [
        (None, None, ("env-model", "http://env/v1", "k-env", 60.0)),
        (
            None,
            {"model": "res-model", "base_url": "http://res/v1", "api_key": "k-res", "timeout_s": 5},
            ("res-model", "http://res/v1", "k-res", 5.0),
        ),
        (
            LLMConfig(model="yaml-model", api_key_env="MY_KEY", timeout_s=9),
            {"model": "res-model", "timeout_s": 5, "api_key": "k-res"},
            ("yaml-model", "http://env/v1", "k-mine", 9.0),
        ),
        (None, {"api_key_env": "MY_KEY"}, ("env-model", "http://env/v1", "k-mine", 60.0)),
    ],
    ids=["environment", "resource-over-environment", "kb-yaml-over-resource", "resource-names-the-key-variable"],
)
def test_settings_come_from_kb_yaml_then_the_resource_then_the_environment(config, resource, expected) -> None:
    s = llm_settings(config, resource, ENV)
    assert (s.model, s.base_url, s.api_key, s.timeout_s) == expected
    assert "k-" not in repr(s)


def test_no_model_or_a_disabled_llm_means_no_client(tmp_path: Path) -> None:
    assert open_llm(None, env={"OPENAI_BASE_URL": "http://x/v1"}) is None
    assert open_llm(LLMConfig(enabled=False), env=ENV) is None
    client = open_llm(None, env=ENV, cache_dir=tmp_path)
    assert client is not None and client.model == "env-model" and client.cache.root == tmp_path / "llm"
    assert LLMConfig(model="m", enabled=False).configured is False


def test_kb_yaml_llm_section_is_strict_and_bounded(tmp_path: Path) -> None:
    (tmp_path / "kb.yaml").write_text("llm: {model: qwen2.5, timeout_s: 30, max_concurrency: 2}\n")
    cfg = load_kb_config(tmp_path).llm
    assert (cfg.model, cfg.timeout_s, cfg.max_concurrency, cfg.api_key_env) == ("qwen2.5", 30, 2, "OPENAI_API_KEY")
    (tmp_path / "kb.yaml").write_text("llm: {model: m, api_key: sk-123}\n")
    with pytest.raises(ConfigError, match=r"unknown key 'llm.api_key'; allowed here: .*api_key_env"):
        load_kb_config(tmp_path)
    (tmp_path / "kb.yaml").write_text("llm: {max_concurrency: 1000}\n")
    with pytest.raises(ConfigError, match=r"llm.max_concurrency = 1000: .*less than or equal to 64"):
        load_kb_config(tmp_path)
