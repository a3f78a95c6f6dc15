"""Hostile documents (issue 14): each is stopped by a limit named in its error, or parsed
within bounds, and the other documents of the KB are indexed all the same.

The files are built here: a DOCX zip bomb (~100 MB of ``word/document.xml`` in a few
hundred KB), DOCX files whose zip headers lie about the sizes, a PDF of thousands of pages,
a DOCX that needs more memory than the limit."""

from __future__ import annotations

import struct
import time
import zipfile
import zlib
from pathlib import Path

import pytest

from corpus_pipeline import indexing
from corpus_pipeline.kbconfig import resolve_kb

GOOD = "# Restores\n\nRestores start from the console. A single file is back in under a minute.\n"


def _base_docx(path: Path) -> None:
    import docx

    d = docx.Document()
    d.add_paragraph("hello")
    d.save(str(path))


def _docx_with_body(path: Path, body_xml: str, *, repeat: int = 1) -> Path:
    """A DOCX whose ``word/document.xml`` body holds ``body_xml`` ``repeat`` times."""
    base = path.with_suffix(".base")
    _base_docx(base)
    with zipfile.ZipFile(base) as zin, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == "word/document.xml":
                text = data.decode()
                i = text.index("<w:body>") + len("<w:body>")
                data = (text[:i] + body_xml * repeat + text[i:]).encode()
            zout.writestr(info.filename, data)
    base.unlink()
    return path


def zip_bomb(path: Path, mb: int = 100) -> Path:
    para = "<w:p><w:r><w:t>" + "lorem ipsum dolor sit amet " * 4 + "</w:t></w:r></w:p>"
    return _docx_with_body(path, para, repeat=mb * 1024 * 1024 // len(para))


def lying_docx(path: Path, *, declared: int, crafted_crc: bool) -> Path:
    """A zip bomb whose headers (local and central) say ``word/document.xml`` is
    ``declared`` bytes; with ``crafted_crc`` its CRC is that of those first bytes, so the
    lie passes zipfile's own check."""
    zip_bomb(path, mb=60)
    raw = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("word/document.xml")
        crc = zlib.crc32(zf.read("word/document.xml")[:declared]) if crafted_crc else info.CRC
    local = info.header_offset
    struct.pack_into("<L", raw, local + 14, crc)
    struct.pack_into("<L", raw, local + 22, declared)
    name = b"word/document.xml"
    central = raw.index(b"PK\x01\x02")
    while raw[central + 46 : central + 46 + len(name)] != name:
        central = raw.index(b"PK\x01\x02", central + 4)
    struct.pack_into("<L", raw, central + 16, crc)
    struct.pack_into("<L", raw, central + 24, declared)
    path.write_bytes(bytes(raw))
    return path


def many_pages_pdf(path: Path, pages: int) -> Path:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    c = canvas.Canvas(str(path), pagesize=A4)
    for i in range(pages):
        c.setFont("Helvetica-Bold", 16)
        c.drawString(72, 780, f"Chapter {i + 1}")
        c.setFont("Helvetica", 10)
        c.drawString(72, 740, f"Page {i + 1}: the appliance keeps encrypted copies of every server.")
        c.showPage()
    c.save()
    return path


def memory_hungry_docx(path: Path, mb: int = 120) -> Path:
    """Big text nodes (4 MB each, under lxml's 10 MB node limit): parsed fast, memory-heavy."""
    para = "<w:p><w:r><w:t>" + "lorem ipsum dolor sit amet " * (4 * 1024 * 1024 // 27) + "</w:t></w:r></w:p>"
    return _docx_with_body(path, para, repeat=mb // 4)


def _index(kb_dir: Path) -> tuple[dict[str, tuple[str, str | None]], dict[str, str], float]:
    kb = resolve_kb(kb_dir)
    t0 = time.monotonic()
    result = indexing.parse_documents(kb, indexing.discover_documents(kb).tables)
    took = time.monotonic() - t0
    texts = {r["path"]: (r["status"], r["error"]) for r in result.named("texts").to_pylist()}
    failed = {f["path"]: f["error"] for f in result.stats.to_dict()["failed"]}
    return texts, failed, took


def _kb(tmp_path: Path, yaml: str = "") -> Path:
    kb = tmp_path / "hostile"
    kb.mkdir()
    (kb / "good.md").write_text(GOOD, encoding="utf-8")
    (kb / "z-good.md").write_text(GOOD.replace("Restores", "Backups"), encoding="utf-8")  # parsed after the bad one
    if yaml:
        (kb / "kb.yaml").write_text(yaml, encoding="utf-8")
    return kb


def _others_indexed(texts: dict[str, tuple[str, str | None]]) -> None:
    assert texts["good.md"] == ("OK", None)
    assert texts["z-good.md"] == ("OK", None)


def test_a_docx_zip_bomb_is_refused_from_its_declared_sizes_before_decompressing(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    bomb = zip_bomb(kb / "bomb.docx", mb=100)
    assert bomb.stat().st_size < 1024 * 1024  # ~400 KB on disk
    texts, failed, took = _index(kb)
    _others_indexed(texts)
    assert texts["bomb.docx"][0] == "FAILED"
    error = failed["bomb.docx"]
    assert "word/document.xml uncompressed 100 MB" in error
    assert "parsing.max_uncompressed_mb = 50 MB" in error and "kb.yaml" in error
    assert took < 30  # refused, not parsed (it ran 400 s and 6.7 GB before)


def test_the_sum_of_a_docx_members_is_bounded_too(tmp_path: Path) -> None:
    kb = _kb(tmp_path, "parsing: {max_uncompressed_mb: 40, max_uncompressed_total_mb: 30}\n")
    zip_bomb(kb / "bomb.docx", mb=35)
    texts, failed, _ = _index(kb)
    _others_indexed(texts)
    assert "parsing.max_uncompressed_total_mb = 30 MB" in failed["bomb.docx"]


@pytest.mark.parametrize("crafted_crc", [False, True])
def test_a_docx_whose_zip_headers_lie_about_sizes_is_refused(tmp_path: Path, crafted_crc: bool) -> None:
    kb = _kb(tmp_path)
    lying_docx(kb / "liar.docx", declared=4096, crafted_crc=crafted_crc)
    with zipfile.ZipFile(kb / "liar.docx") as zf:
        assert zf.getinfo("word/document.xml").file_size == 4096  # the lie is what zipfile sees
    texts, failed, took = _index(kb)
    _others_indexed(texts)
    assert "inflates to more than the 4,096 bytes its zip header declares" in failed["liar.docx"]
    assert took < 30


def test_a_pdf_of_thousands_of_pages_is_parsed_within_bounds_or_stopped_by_the_page_limit(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    many_pages_pdf(kb / "long.pdf", 3000)
    texts, _failed, took = _index(kb)
    _others_indexed(texts)
    assert texts["long.pdf"] == ("OK", None)  # 3,000 simple pages: well within parsing.timeout_s = 300
    assert took < 120

    (kb / "kb.yaml").write_text("parsing: {max_pages: 1000}\n", encoding="utf-8")
    texts, failed, _ = _index(kb)
    _others_indexed(texts)
    assert "the PDF's page count 3,000 is over parsing.max_pages = 1000" in failed["long.pdf"]


def test_a_document_over_the_time_limit_is_stopped_and_the_kb_goes_on(tmp_path: Path) -> None:
    # the zip bomb let through the size limit: python-docx would take minutes on it
    kb = _kb(tmp_path, "parsing: {max_uncompressed_mb: 200, timeout_s: 3}\n")
    zip_bomb(kb / "bomb.docx", mb=100)
    texts, failed, took = _index(kb)
    _others_indexed(texts)
    assert failed["bomb.docx"].startswith("parsing took over parsing.timeout_s = 3 s; raise parsing.timeout_s")
    assert took < 20


def test_a_document_over_the_memory_limit_is_stopped_and_the_kb_goes_on(tmp_path: Path) -> None:
    kb = _kb(tmp_path, "parsing: {max_uncompressed_mb: 200, max_memory_mb: 512}\n")
    memory_hungry_docx(kb / "fat.docx", mb=120)
    texts, failed, took = _index(kb)
    _others_indexed(texts)
    assert failed["fat.docx"].startswith("parsing needed more than parsing.max_memory_mb = 512 MB; raise")
    assert took < 60


def test_raising_the_limit_parses_again_what_it_stopped(tmp_path: Path) -> None:
    kb_dir = _kb(tmp_path, "parsing: {max_pages: 5}\n")
    many_pages_pdf(kb_dir / "long.pdf", 10)
    kb = resolve_kb(kb_dir)
    first = indexing.parse_documents(kb, indexing.discover_documents(kb).tables)
    stopped = {r["path"]: r["error"] for r in first.named("texts").to_pylist()}["long.pdf"]
    assert "parsing.max_pages = 5" in (stopped or "")
    (kb_dir / "kb.yaml").write_text("parsing: {max_pages: 50}\n", encoding="utf-8")
    kb = resolve_kb(kb_dir)
    again = indexing.parse_documents(kb, indexing.discover_documents(kb).tables, first.tables)
    rows = {r["path"]: r for r in again.named("texts").to_pylist()}
    assert rows["long.pdf"]["status"] == "OK"
    assert again.stats.to_dict()["reused"] == 2  # the markdown files, unchanged


# --- inputs (issue 14, part 7) ----------------------------------------------------------

BIG5 = "中央處理器高負載問題排查\n問題現象：使用率持續五分鐘超過百分之八十五，交易延遲升高。\n排查步驟：先用命令定位進程，再定位線程。\n"
SJIS = "サーバーの負荷が高い場合の対処方法\n現象：CPU 使用率が五分間 85% を超え、取引の遅延が増加します。\n"
ZH = "磁盘告警手册\n\n一、告警规则\n\n使用率超过 80% 时预警。恢复步骤见下图。\n"


@pytest.mark.parametrize(
    ("name", "data", "text"),
    [
        ("big5.txt", BIG5.encode("big5"), BIG5),
        ("sjis.txt", SJIS.encode("shift_jis"), SJIS),
        ("gbk.txt", ZH.encode("gbk"), ZH),
        ("short-big5.txt", "資料庫連線池耗盡".encode("big5"), "資料庫連線池耗盡"),
        ("latin1.txt", "Café au lait, naïve résumé.\n".encode("cp1252"), "Café au lait, naïve résumé.\n"),
        ("utf16le.txt", ZH.encode("utf-16-le"), ZH),  # no BOM, CJK: few NUL bytes
        ("utf16be.md", ("# Restores\n\n" + ZH).encode("utf-16-be"), "# Restores\n\n" + ZH),
        ("utf16le-en.txt", GOOD.encode("utf-16-le"), GOOD),
    ],
)
def test_legacy_encodings_and_utf16_without_bom_decode_to_the_right_text(
    tmp_path: Path, name: str, data: bytes, text: str
) -> None:
    kb_dir = _kb(tmp_path)
    (kb_dir / name).write_bytes(data)
    kb = resolve_kb(kb_dir)
    rows = {
        r["path"]: r
        for r in indexing.parse_documents(kb, indexing.discover_documents(kb).tables).named("texts").to_pylist()
    }
    assert (rows[name]["status"], rows[name]["error"]) == ("OK", None)
    assert rows[name]["text"] == text  # never mojibake with status OK
    assert rows["good.md"]["status"] == "OK"


def test_invalid_utf8_is_refused_with_where_not_read_as_mojibake(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    raw = ("正常的 UTF-8 文本，第二行。\n" * 30).encode()
    (kb / "broken.txt").write_bytes(raw[:200] + b"\xff\xfe" + raw[200:])
    texts, failed, _ = _index(kb)
    _others_indexed(texts)
    assert failed["broken.txt"].startswith("not valid UTF-8: 2 invalid byte sequence(s) in otherwise UTF-8 text")
    assert "at byte 200 (line" in failed["broken.txt"] and "Re-save it as UTF-8" in failed["broken.txt"]


ASCII = (GOOD * 4).encode()  # 344 bytes, 16 lines


@pytest.mark.parametrize(
    ("raw", "error"),
    [
        # ASCII with a stray BOM and a stray 0x80: read as cp1251 mojibake before issue 40
        (
            ASCII[:200] + b"\xff\xfe" + ASCII[200:] + b"Total: 5 \x80\n",
            "not valid UTF-8: invalid byte(s) in ASCII text, the first at byte 200 (line 9): 0xFF 0xFE;",
        ),
        # UTF-8 with a few typographic characters and a paragraph pasted from a cp1252 file
        (
            "We’ll restore it — quickly.\n".encode()
            + ASCII
            + "Le résumé a été envoyé à François.\n".encode("cp1252") * 3,
            "not valid UTF-8: 21 invalid byte sequence(s) in otherwise UTF-8 text, the first at byte 380 (line 14)",
        ),
        # UTF-8 cut short inside its last character
        ("Restores: “fast”, café, 世界".encode()[:-2], "not valid UTF-8: it ends inside a multibyte character at byte"),
    ],
    ids=["stray-bytes-in-ascii", "pasted-cp1252", "cut-short"],
)
def test_invalid_utf8_in_mostly_ascii_text_is_refused_with_where_not_read_as_a_code_page(
    tmp_path: Path, raw: bytes, error: str
) -> None:
    """Issue 40: ASCII text with a few bad bytes came out as cp1251/cp1252 mojibake, status OK."""
    kb = _kb(tmp_path)
    (kb / "stray.txt").write_bytes(raw)
    texts, failed, _ = _index(kb)
    _others_indexed(texts)
    assert texts["stray.txt"][0] == "FAILED"
    assert failed["stray.txt"].startswith(error)
    assert failed["stray.txt"].endswith("Re-save it as UTF-8")


def test_html_nested_deeper_than_the_parser_limit_is_recorded_not_cut(tmp_path: Path) -> None:
    kb = _kb(tmp_path)
    deep = "<html><body><p>top</p>" + "<div>" * 300 + "deep text" + "</div>" * 300 + "<p>after</p></body></html>"
    (kb / "deep.html").write_text(deep, encoding="utf-8")
    (kb / "fine.html").write_text(
        "<html><body>" + "<div>" * 100 + "<p>nested fine</p>" + "</div>" * 100 + "</body></html>"
    )
    texts, failed, _ = _index(kb)
    _others_indexed(texts)
    assert "HTML nested deeper than 255 levels" in failed["deep.html"]
    assert texts["fine.html"] == ("OK", None)


def test_skipped_symlinks_and_files_are_listed_with_their_reason(tmp_path: Path) -> None:
    kb_dir = _kb(tmp_path)
    outside = tmp_path / "outside.md"
    outside.write_text(GOOD, encoding="utf-8")
    (kb_dir / "link.md").symlink_to(outside)
    (tmp_path / "elsewhere").mkdir()
    (kb_dir / "linked-folder").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (kb_dir / "data.xlsx").write_bytes(b"not a supported format")
    (kb_dir / "picture.png").write_bytes(b"\x89PNG\r\n")  # read through documents: not listed
    result = indexing.discover_documents(resolve_kb(kb_dir))
    stats = result.stats.to_dict()
    reasons = {s["path"]: s["reason"] for s in stats["skipped"]}
    assert set(reasons) == {"link.md", "linked-folder", "data.xlsx"}
    assert reasons["link.md"].startswith("a symbolic link (file); links are not followed")
    assert reasons["linked-folder"].startswith("a symbolic link (folder)")
    assert "not a supported format" in reasons["data.xlsx"]
    assert stats["skipped_count"] == 3
    assert sorted(result.table.column("path").to_pylist()) == ["good.md", "z-good.md"]


def test_a_file_name_in_another_encoding_and_a_named_pipe_are_skipped_not_fatal(tmp_path: Path) -> None:
    """A Latin-1 file name used to stop the whole KB with a UnicodeEncodeError; a named pipe
    would block discovery forever if it were opened."""
    import os

    kb_dir = _kb(tmp_path)
    with open(os.path.join(os.fsencode(kb_dir), b"caf\xe9.md"), "wb") as f:
        f.write(GOOD.encode())
    os.mkfifo(kb_dir / "pipe.md")
    result = indexing.discover_documents(resolve_kb(kb_dir))
    reasons = {s["path"]: s["reason"] for s in result.stats.to_dict()["skipped"]}
    assert reasons["caf\ufffd.md"].startswith("its name is not valid UTF-8")
    assert reasons["pipe.md"].startswith("not a regular file")
    assert sorted(result.table.column("path").to_pylist()) == ["good.md", "z-good.md"]
