"""The web page of `corpus serve` in a real headless browser (Chromium from apt, driven by
selenium through the apt chromium-driver): the key prompt, a search with its matched children
highlighted and explained, a document's parents/children/token counts/image, two versions
side by side, Chinese text. Screenshots are kept as test artefacts: under the pytest tmp dir
(``.../browser-artefacts/``, printed) and, when ``CORPUS_TEST_ARTEFACTS`` is set, copied there.

Also, over plain HTTP: the page shell is public but nothing that reads the index is, and
the image endpoint serves files inside the warehouse's images folder only."""

from __future__ import annotations

import os
import re
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import TINY_EN, TINY_ZH

from corpus_pipeline.serve.app import create_app
from serve.test_http import _cli, _Server

pytestmark = pytest.mark.slow
KEY = "browser-key-7f3a9c"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
PORT_QUESTION = "Which port does the web console listen on?"
CPU_QUESTION = "CPU 使用率持续超过 85% 怎么排查"


def _png(path: Path) -> None:
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGB", (360, 120), "white")
    ImageDraw.Draw(img).text((10, 40), "RESTORE SNAPSHOT", fill="black", font=ImageFont.load_default(size=28))
    img.save(path)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny KB (an English markdown document with an image, a Chinese text document),
    indexed twice: child max_chars 120, then 200 (two versions to compare)."""
    home = tmp_path_factory.mktemp("browser") / "corpus"
    kb = home / "kbs" / "tiny"
    kb.mkdir(parents=True)
    (kb / "harbor.md").write_text(
        TINY_EN + "\n## Console\n\nThe console dashboard:\n\n![dashboard](console.png)\n\nIt lists every snapshot.\n",
        encoding="utf-8",
    )
    _png(kb / "console.png")
    (kb / "cpu.txt").write_text(TINY_ZH, encoding="utf-8")
    yaml = (
        "chunking:\n  plan: PARENT:RECURSIVE;CHILD:RECURSIVE\n"
        "  parent: {RECURSIVE: {max_chars: 300, overlap_chars: 40}}\n"
        "  child: {RECURSIVE: {max_chars: 120, overlap_chars: 20}}\n"
    )
    (kb / "kb.yaml").write_text(yaml, encoding="utf-8")
    for _ in range(2):
        r = _cli(home, "index", "--kb", "tiny")
        assert r.returncode == 0, r.stderr
        (kb / "kb.yaml").write_text(yaml.replace("max_chars: 120", "max_chars: 200"), encoding="utf-8")
    return home


@pytest.fixture(scope="module")
def served(home: Path) -> Iterator[str]:
    with _Server(create_app(home, api_keys=[KEY], rate_per_s=0)) as url:
        yield url


@pytest.fixture(scope="module")
def artefacts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("browser-artefacts")
    yield out
    print(f"\nbrowser screenshots: {out}")
    target = os.environ.get("CORPUS_TEST_ARTEFACTS")
    if target:
        dest = Path(target) / "browser"
        shutil.copytree(out, dest, dirs_exist_ok=True)
        print(f"browser screenshots copied to {dest}")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.skip(
            "chromium and chromium-driver are not installed (apt-get install chromium chromium-driver; scripts/system-deps.sh)"
        )
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the dev extra)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,1000",
                "--lang=en-US", f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):  # fmt: skip
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver: Any, css: str, timeout: float = 180) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(ec.visibility_of_element_located((By.CSS_SELECTOR, css)))


def _all(driver: Any, css: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, css))


def _shot(driver: Any, folder: Path, name: str) -> Path:
    """A screenshot of the whole page (the window stretched to the page's height)."""
    height = int(driver.execute_script("return document.documentElement.scrollHeight"))
    driver.set_window_size(1400, min(max(height + 120, 800), 6000))
    path = folder / f"{name}.png"
    assert driver.save_screenshot(str(path)), f"no screenshot {path}"
    assert path.stat().st_size > 10_000
    driver.set_window_size(1400, 1000)
    return path


def _search(driver: Any, question: str) -> list[Any]:
    box = _wait(driver, "#q")
    box.clear()
    box.send_keys(question)
    _all(driver, "#search-form button")[0].click()
    _wait(driver, ".search-results[data-version] .summary")
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 180).until(lambda d: question in d.find_element("css selector", ".summary").text)
    return _all(driver, ".result")


def test_the_page_in_a_headless_browser(served: str, browser: Any, artefacts: Path) -> None:
    from selenium.webdriver.support.ui import Select, WebDriverWait

    d = browser
    d.get(f"{served}/")
    assert d.title == "corpus_pipeline"
    # keys are required: the page asks for one, then every fetch carries it
    _wait(d, "#key-form", 30)
    assert "API key" in d.find_element("id", "key-why").text
    d.find_element("id", "key").send_keys(KEY)
    d.find_element("css selector", "#key-form button").click()
    WebDriverWait(d, 30).until(lambda d: len(Select(d.find_element("id", "version")).options) == 2)
    assert not d.find_element("id", "key-form").is_displayed()
    assert Select(d.find_element("id", "kb")).first_selected_option.get_attribute("value") == "tiny"
    active = Select(d.find_element("id", "version")).first_selected_option.text
    assert "(active)" in active
    _wait(d, ".documents table")  # the documents of the active version
    assert {a.text for a in _all(d, ".documents .doc-link")} == {"cpu.txt", "harbor.md"}
    _shot(d, artefacts, "1-documents")

    # search: parents with their matched children highlighted, what found them in words
    results = _search(d, PORT_QUESTION)
    assert results, d.find_element("id", "status").text
    first = results[0]
    hits = first.find_elements("css selector", ".parent-text .hit")
    assert hits and "8443" in first.find_element("css selector", ".parent-text").text
    assert any("8443" in h.text for h in hits), [h.text for h in hits]
    why = first.find_element("css selector", ".hits").text
    assert re.search(r"cosine similarity 0\.\d+", why) or "vector" in why, why
    assert "Relevance" in first.text and "matched child" in first.text
    _shot(d, artefacts, "2-search")

    # Chinese
    results = _search(d, CPU_QUESTION)
    assert "top -Hp" in results[0].find_element("css selector", ".parent-text").text
    assert results[0].find_elements("css selector", ".parent-text .hit")
    _shot(d, artefacts, "3-search-zh")

    # open the English document from its result: parents, children, token counts, the image
    _search(d, PORT_QUESTION)[0].find_element("css selector", "a.doc-link").click()
    _wait(d, ".document .doc-body")
    limit_text = d.find_element("css selector", ".model-limit b").text
    assert limit_text.isdigit() and int(limit_text) > 100, limit_text
    parents = _all(d, ".document .parent")
    children = _all(d, ".document .parent .text .child[data-chunk]")
    assert len(parents) >= 2 and len(children) >= 4
    assert {c.get_attribute("class").split()[1] for c in children} >= {"c0", "c1"}  # alternating
    tokens = [t.text for t in _all(d, ".document .chunk .tokens")]
    assert tokens and all(re.fullmatch(rf"\d+ / {limit_text} tokens", t) for t in tokens), tokens
    assert _all(d, ".document .parent-head .section")[0].text.startswith("§ Harbor backup appliance")
    figure = _wait(d, ".document .chunk.image-chunk figure.image")
    WebDriverWait(d, 30).until(
        lambda d: d.execute_script(
            "const i = document.querySelector('.image-chunk figure img'); return i && i.src.startsWith('blob:') && i.naturalWidth > 0"
        )
    )
    assert re.search(r"OCR_ONLY|DESCRIBED|DEGRADED", figure.text), figure.text  # an image chunk was made
    assert ("degraded" in figure.text) == ("DESCRIBED" not in figure.text)
    _shot(d, artefacts, "4-document")

    # the two versions of it side by side
    d.find_element("css selector", ".document a.compare-link").click()
    _wait(d, ".compare .columns")
    columns = _all(d, ".compare .column")
    assert len(columns) == 2
    versions = [c.get_attribute("data-version") for c in columns]
    assert versions[0] != versions[1]
    counts = [len(c.find_elements("css selector", ".child[data-chunk]")) for c in columns]
    assert all(counts) and counts[0] != counts[1], counts  # child max_chars 120 against 200
    assert all("only here" in c.find_element("css selector", ".diff").text for c in columns)
    assert _all(d, ".compare .child.differs")
    _shot(d, artefacts, "5-compare")

    # the Chinese document, opened from the list
    d.find_element("id", "nav-docs").click()
    _wait(d, ".documents table")
    next(a for a in _all(d, ".documents .doc-link") if a.text == "cpu.txt").click()
    _wait(d, ".document .doc-body")
    text = d.find_element("css selector", ".document .doc-body").text
    assert "CPU高负载问题排查" in text and "立即回滚最近一次发布" in text
    assert d.execute_script("return document.characterSet") == "UTF-8"
    _shot(d, artefacts, "6-document-zh")
    assert not [e for e in d.get_log("browser") if e.get("level") == "SEVERE" and "401" not in e.get("message", "")]


def _raw_get(url: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """A GET with the path sent exactly as given (no client-side normalisation of ``..``)."""
    host, port = url.removeprefix("http://").split(":")
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return int(data.split(b" ", 2)[1]), data.split(b"\r\n\r\n", 1)[-1]


def test_page_auth_and_image_serving(home: Path, served: str) -> None:
    auth = {"Authorization": f"Bearer {KEY}"}
    # the shell and its static files hold no data: public; everything that reads the index is not
    page = httpx.get(f"{served}/")
    assert page.status_code == 200 and 'charset="utf-8"' in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert httpx.get(f"{served}/ui/static/web.js").status_code == 200
    assert httpx.get(f"{served}/ui/static/app.py").status_code == 404
    for path in ("/kbs", "/ui/fragments/documents?kb=tiny", "/ui/api/kbs/tiny/documents"):
        assert httpx.get(f"{served}{path}").status_code == 401, path
    assert httpx.post(f"{served}/", content=b"{}").status_code in (401, 404, 405)  # only GET is public

    images = sorted(p for p in (home / "warehouse" / "images").rglob("*.png"))
    assert images, "the KB's image was not stored"
    rel = images[0].relative_to(home / "warehouse" / "images").as_posix()
    assert httpx.get(f"{served}/ui/images/{rel}").status_code == 401
    ok = httpx.get(f"{served}/ui/images/{rel}", headers=auth)
    assert ok.status_code == 200 and ok.headers["content-type"] == "image/png"
    assert ok.content == images[0].read_bytes() and ok.headers["x-content-type-options"] == "nosniff"
    docs = httpx.get(f"{served}/ui/api/kbs/tiny/documents", headers=auth).json()["documents"]
    harbor = next(d for d in docs if d["path"] == "harbor.md")
    view = httpx.get(f"{served}/ui/api/kbs/tiny/documents/{harbor['doc_id']}", headers=auth).json()
    assert [i["url"] for i in view["images"]] == [f"/ui/images/{rel}"]
    assert view["model"]["max_tokens"] and all(
        c["text"] == view["text"][c["start_offset"] : c["end_offset"]]
        for p in view["parents"]
        for c in p["children"]
        if not c["derived"]
    )

    # a file that is not an image of the warehouse is never served, however it is named
    secret = home / "warehouse" / "versions" / "tiny" / "ACTIVE"
    outside = home / "warehouse" / "images" / "ab" / ("ab" + "0" * 62 + ".png")
    outside.parent.mkdir(exist_ok=True)
    outside.symlink_to(secret)  # a valid-looking name pointing outside the folder
    sha = rel.split("/")[1].split(".")[0]
    for path in (
        "/ui/images/../versions/tiny/ACTIVE",
        "/ui/images/../../kbs/tiny/kb.yaml",
        "/ui/images/%2e%2e/%2e%2e/kbs/tiny/kb.yaml",
        "/ui/images/..%2f..%2fversions%2ftiny%2fACTIVE",
        "/ui/images/..%2F..%2Fkbs/tiny%2Fkb.yaml",
        f"/ui/images/{rel.split('/')[0]}/..%2f..%2fversions%2ftiny%2fACTIVE",
        f"/ui/images/../{rel}",
        f"/ui/images/zz/{sha}.png",
        f"/ui/images/{outside.parent.name}/{outside.name}",
        "/ui/images/%2fetc/passwd",
    ):
        status, body = _raw_get(served, path, auth)
        assert status in (400, 404), (path, status)
        assert secret.read_bytes().strip() not in body, path
        assert b"chunking" not in body, path
