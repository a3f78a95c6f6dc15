"""describe_images against the local OpenAI-compatible server, real tesseract for the fallback."""

from __future__ import annotations

import base64
import dataclasses
import json
from pathlib import Path

import pytest
from support.openai_server import OpenAIServer, Reply

from corpus_pipeline.vision import VisionConfig, describe_images, tesseract_available
from vision.conftest import MakeImage

needs_tesseract = pytest.mark.skipif(not tesseract_available(), reason="tesseract is not installed")

ANSWER = json.dumps(
    {
        "description": "A port matrix.",
        "keywords": ["ports", "8443"],
        "image_type": "TABLE_IMAGE",
        "embedding_text": "Port matrix: 8443 console",
    }
)


KEY_ENV = "CORPUS_TEST_VISION_KEY"


@pytest.fixture(autouse=True)
def _vision_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-secret-123456")  # (the key is read from the variable api_key_env names)


def settings(server: OpenAIServer | None, **kw: object) -> VisionConfig:
    base = {
        "model": "vlm-test",
        "base_url": server.base_url if server else None,
        "api_key_env": KEY_ENV,
        "timeout_s": 2.0,
        "max_retries": 0,
    }
    base.update(kw)
    return VisionConfig(**base)  # type: ignore[arg-type]


def test_a_fanned_out_run_describes_each_pending_image_once_in_its_batch(
    openai_server: OpenAIServer, make_image: MakeImage, tmp_path: Path
) -> None:
    """``images_to_describe`` is what needs a call (not cached, not skipped, once per image
    hash); the merge places each batch's answer at every row of that image and calls nothing
    for them, not even when a batch fell back to OCR (a failed call is not retried there)."""
    from dataclasses import replace

    from corpus_pipeline.vision.describe import images_to_describe

    cache = tmp_path / "cache"
    a, b = make_image("PORTS"), make_image("DISKS", block_index=3)
    svg = replace(make_image("VECTOR"), mime_type="image/svg+xml")  # skipped: never sent
    rows = [a, b, replace(a, doc_id="doc2", block_index=7), svg]
    s = settings(openai_server)
    assert [i.image_id for i in images_to_describe(rows, s, cache)] == [a.image_id, b.image_id]
    openai_server.queue(Reply.chat(ANSWER))
    [described] = describe_images([a], s, cache)  # batch 1: answered, cached
    assert [i.image_id for i in images_to_describe(rows, s, cache)] == [b.image_id]
    openai_server.default = Reply.error(500)
    [degraded] = describe_images([b], s.model_copy(update={"ocr": False}), cache)  # batch 2: the call failed
    assert degraded.status == "SKIPPED" and len(openai_server.calls()) == 2
    merged = describe_images(rows, s, cache, described={a.image_id: described, b.image_id: degraded})
    assert len(openai_server.calls()) == 2  # the merge called nothing
    assert [(d.image_id, d.doc_id, d.block_index, d.status) for d in merged] == [
        (a.image_id, "doc1", 0, "DESCRIBED"),
        (b.image_id, "doc1", 3, "SKIPPED"),
        (a.image_id, "doc2", 7, "DESCRIBED"),
        (svg.image_id, "doc1", 0, "SKIPPED"),
    ]
    assert merged[2].description == described.description


def test_described_by_the_model_then_cached(openai_server: OpenAIServer, make_image: MakeImage, tmp_path: Path) -> None:
    image = make_image("PORTS")
    openai_server.queue(Reply.chat(ANSWER))
    (d,) = describe_images([image], settings(openai_server), tmp_path / "cache")
    assert (d.status, d.image_type, d.embedding_text, d.keywords, d.degraded) == (
        "DESCRIBED",
        "TABLE_IMAGE",
        "Port matrix: 8443 console",
        ("ports", "8443"),
        False,
    )
    (call,) = openai_server.calls()
    assert call.model == "vlm-test" and call.body["response_format"] == {"type": "json_object"}
    (part,) = call.parts("image_url")
    url = part["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == Path(image.path).read_bytes()
    assert call.headers["authorization"] == "Bearer sk-secret-123456"
    assert "sk-secret" not in repr(settings(openai_server))  # the key never shows
    # second run: answered from the cache, no call
    (again,) = describe_images([image], settings(openai_server), tmp_path / "cache")
    assert again == d and len(openai_server.calls()) == 1


def test_fenced_json_answer_is_accepted(openai_server: OpenAIServer, make_image: MakeImage) -> None:
    openai_server.queue(Reply.chat("Sure:\n```json\n" + ANSWER + "\n```"))
    (d,) = describe_images([make_image("A")], settings(openai_server), None)
    assert d.status == "DESCRIBED" and d.description == "A port matrix."


@needs_tesseract
@pytest.mark.parametrize(
    "failure",
    [
        Reply.error(500),
        Reply.malformed(),
        Reply.chat("no json here"),
        Reply.chat('{"image_type": "X"}'),
        Reply.chat(ANSWER).after(3.0),
    ],
    ids=["http-500", "malformed-body", "not-json", "invalid-answer", "timeout"],
)
def test_vision_failure_with_ocr_text_is_degraded(
    openai_server: OpenAIServer, make_image: MakeImage, tmp_path: Path, failure: Reply
) -> None:
    openai_server.queue(failure)
    (d,) = describe_images([make_image("BACKUP 42")], settings(openai_server), tmp_path / "cache")
    assert (d.status, d.degraded, d.degrade_reason, d.image_type) == ("DEGRADED", True, "VLM_FAILED_WITH_OCR", "IMAGE")
    assert "BACKUP 42" in d.ocr_text and d.embedding_text == "[image] " + d.ocr_text
    assert d.error and "sk-secret" not in d.error


@needs_tesseract
def test_vision_failure_without_ocr_text_is_skipped_with_reason(
    openai_server: OpenAIServer, make_image: MakeImage
) -> None:
    openai_server.queue(Reply.error(503))
    (d,) = describe_images([make_image("")], settings(openai_server), None)
    assert d.status == "SKIPPED" and d.skip_reason.startswith("VLM_FAILED_NO_OCR_TEXT") and d.embedding_text == ""


@needs_tesseract
def test_no_vision_model_means_ocr_only_chinese_without_spaces(make_image: MakeImage, tmp_path: Path) -> None:
    image = dataclasses.replace(
        make_image("磁盘告警", cjk=True), context_before="磁盘监控：", context_after="请清理日志。"
    )
    calls: list[str] = []

    from corpus_pipeline.vision.ocr import ocr_image

    def counting_ocr(data: bytes, langs: str) -> str:
        calls.append(langs)
        return ocr_image(data, langs)

    cfg = settings(None, model=None)
    (d,) = describe_images([image], cfg, tmp_path / "cache", ocr=counting_ocr)
    assert (d.status, d.degraded, d.degrade_reason) == ("OCR_ONLY", True, "OCR_ONLY_NO_VLM")
    assert "磁盘告警" in d.ocr_text and d.embedding_text.startswith("[图片] ")  # (a Chinese document's image)
    describe_images([image], cfg, tmp_path / "cache", ocr=counting_ocr)
    assert calls == ["eng+chi_sim"]  # OCR cached by image hash


def test_neither_model_nor_ocr_skips_every_image_with_reason(make_image: MakeImage) -> None:
    (d,) = describe_images([make_image("X")], settings(None, model=None, ocr=False), None)
    assert d.status == "SKIPPED" and d.skip_reason.startswith("NO_VLM_OCR_DISABLED")


def test_unreadable_small_and_unstored_images_are_skipped(make_image: MakeImage) -> None:
    from dataclasses import replace

    good = make_image("X")
    images = [replace(good, mime_type="image/svg+xml"), replace(good, width=8, height=8), replace(good, path="")]
    reasons = [d.skip_reason.split(":")[0] for d in describe_images(images, settings(None, model=None), None)]
    assert reasons == ["UNSUPPORTED_FORMAT", "TOO_SMALL", "NOT_STORED"]


def test_model_down_stops_calling_after_three_failures(openai_server: OpenAIServer, make_image: MakeImage) -> None:
    openai_server.default = Reply.error(500)
    images = [make_image(str(i), block_index=i) for i in range(5)]
    out = describe_images(images, settings(openai_server, ocr=False), None)
    assert len(openai_server.calls()) == 3
    assert all(d.status == "SKIPPED" for d in out) and "consecutive failures" in (out[-1].error or "")


def test_same_image_twice_is_described_once(openai_server: OpenAIServer, make_image: MakeImage) -> None:
    from dataclasses import replace

    openai_server.queue(Reply.chat(ANSWER))
    image = make_image("X")
    out = describe_images([image, replace(image, block_index=7)], settings(openai_server), None)
    assert [d.block_index for d in out] == [0, 7] and all(d.status == "DESCRIBED" for d in out)
    assert len(openai_server.calls()) == 1


def test_settings_come_from_kb_yaml_then_environment() -> None:
    from corpus_pipeline.vision import vision_settings

    env = {"OPENAI_BASE_URL": "http://env/v1", "CORPUS_VISION_MODEL": "env-model", "MY_KEY": "k1"}
    s = vision_settings(VisionConfig(model="yaml-model", api_key_env="MY_KEY"), env)
    assert (s.model, s.base_url, s.api_key(env)) == ("yaml-model", "http://env/v1", "k1")
    assert isinstance(s, VisionConfig)  # (one type: the section, resolved)
    assert vision_settings(None, {}).has_vision_model is False
