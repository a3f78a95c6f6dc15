"""Nothing left behind (issue 40): what a killed run staged, a dropped KB's images, and the old
text of an edited or deleted document, looked for in every file under CORPUS_HOME (Parquet
and every Lance version decoded, caches, the Dagster instance, staging)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from corpus_pipeline.store.drop import images_in_use
from corpus_pipeline.store.layout import Layout
from corpus_pipeline.store.locks import kb_lock
from tests.faults.leaks import files_containing

pytestmark = pytest.mark.slow
CORPUS = str(Path(sys.executable).with_name("corpus"))
REPO = Path(__file__).resolve().parents[2]
SECRET = "ZEBRA4471QUOKKA"
FILLER = "Replicas copy each nightly snapshot to the second site before the retention policy runs. "


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "CORPUS_HOME": str(home), "DAGSTER_HOME": str(home / "dagster"), "HF_HUB_OFFLINE": "1"}


def _run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CORPUS, *args], env=_env(home), cwd=REPO, capture_output=True, text=True, timeout=600)


def _staged_with(home: Path, needle: bytes) -> list[Path]:
    """The staged files that hold ``needle`` (a file a run is removing meanwhile is skipped)."""
    found = []
    for f in (home / "warehouse" / "staging").glob("*/*"):
        try:
            if needle in f.read_bytes():
                found.append(f)
        except OSError:
            continue
    return found


def _kill_once_staged(home: Path, needle: str, *args: str, timeout: float = 300) -> None:
    """``corpus index`` killed (-9) as soon as a staged batch holds ``needle``: between a batch
    step and its merge, which reads and removes the batches."""
    proc = subprocess.Popen(
        [CORPUS, "index", *args], env=_env(home), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, start_new_session=True,
    )  # fmt: skip
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if _staged_with(home, needle.encode()):
                os.killpg(proc.pid, signal.SIGKILL)
                break
            assert proc.poll() is None, f"corpus index ended before a batch was staged: {proc.communicate()}"
            time.sleep(0.005)
    finally:
        if proc.poll() is None and time.monotonic() - t0 >= timeout:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL


def _secret_kb(kb: Path, filler_docs: int = 40) -> None:
    """The secret in one document, and enough others that the parse merge takes a while."""
    (kb / "vault.md").write_text(f"# Vault\n\nThe vault code is {SECRET} and it opens the north door.\n")
    for i in range(filler_docs):
        (kb / f"filler{i:02d}.md").write_text(f"# Filler {i}\n\n" + FILLER * (5 + i % 7) + "\n")


def _fake_live_staging(home: Path, kb: str, run_id: str) -> Path:
    """A staging folder of a run of ``kb`` in progress (what its batch step wrote)."""
    folder = Layout(home).staging_dir(run_id)
    folder.mkdir(parents=True)
    (folder / "_kb.json").write_text(json.dumps({"kb": kb, "run_id": run_id}))
    (folder / "child_chunks.children_batch_b0___result__b0.pkl").write_bytes(b"a batch in progress")
    return folder


def test_a_killed_runs_staging_is_removed_by_the_next_index_of_its_kb(tiny_kb, corpus_home):
    _secret_kb(tiny_kb)
    _kill_once_staged(corpus_home, SECRET, "--kb", "tiny", "--workers", "1")
    staging = corpus_home / "warehouse" / "staging"
    assert _staged_with(corpus_home, SECRET.encode()), "the kill left no staged batch with the KB's text"
    other = _fake_live_staging(corpus_home, "other", "run-of-other-in-progress")
    (tiny_kb / "vault.md").unlink()  # the secret's document is deleted: its text must go everywhere
    with kb_lock(Layout(corpus_home), "other"):  # another KB's run holds its lock while it runs
        r = _run(corpus_home, "index", "--kb", "tiny")
    assert r.returncode == 0, r.stdout + r.stderr
    assert files_containing(corpus_home, SECRET) == []
    assert [p.name for p in staging.iterdir()] == [other.name]  # the live run's batches are left alone
    assert "removed the staged batches of 1 dead run(s) of tiny" in r.stderr, r.stderr


def test_drop_removes_a_killed_runs_staging(tiny_kb, corpus_home):
    _secret_kb(tiny_kb)
    _kill_once_staged(corpus_home, SECRET, "--kb", "tiny", "--workers", "1")
    assert _staged_with(corpus_home, SECRET.encode())
    other = _fake_live_staging(corpus_home, "other", "run-of-other-in-progress")
    with kb_lock(Layout(corpus_home), "other"):
        r = _run(corpus_home, "drop", "--kb", "tiny", "--yes", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    # What is left of the KB is its documents (the user's, under kbs/).
    assert files_containing(corpus_home, SECRET) == ["kbs/tiny/vault.md"]
    assert [p.name for p in (corpus_home / "warehouse" / "staging").iterdir()] == [other.name]
    assert len(json.loads(r.stdout)["staging"]) == 1, r.stdout


def test_the_next_writer_keeps_staging_it_cannot_prove_dead(corpus_home):
    """Unit level: a run named live, another KB's run, and a folder with no marker are kept."""
    from corpus_pipeline.store.staging import remove_dead_staging

    layout = Layout(corpus_home)
    dead = _fake_live_staging(corpus_home, "tiny", "dead-run")
    live = _fake_live_staging(corpus_home, "tiny", "live-run-the-daemon-launched")
    other = _fake_live_staging(corpus_home, "other", "run-of-other")
    unmarked = layout.staging_dir("unmarked-run")
    unmarked.mkdir()
    assert remove_dead_staging(layout, "tiny", live={live.name}) == [dead.name]
    assert sorted(p.name for p in layout.staging.iterdir()) == sorted([live.name, other.name, unmarked.name])


def _png(color: tuple[int, int, int]) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (24, 24), color).save(buf, format="PNG")
    return buf.getvalue()


def _stored_images(home: Path) -> set[str]:
    return {f.name for f in (home / "warehouse" / "images").glob("*/*") if f.is_file()}


def test_drop_removes_the_kbs_own_images_at_once_and_keeps_a_shared_one(tiny_kb, corpus_home):
    other = corpus_home / "kbs" / "other"
    other.mkdir()
    (other / "harbor.md").write_text((tiny_kb / "harbor.md").read_text())
    own, shared = _png((200, 30, 30)), _png((30, 30, 200))
    for kb, pictures in ((tiny_kb, {"own.png": own, "shared.png": shared}), (other, {"shared.png": shared})):
        for name, data in pictures.items():
            (kb / name).write_bytes(data)
        refs = "\n\n".join(f"![{name}]({name})" for name in pictures)
        (kb / "pictures.md").write_text(f"# Pictures\n\nThe console screens.\n\n{refs}\n")
    r = _run(corpus_home, "index")
    assert r.returncode == 0, r.stdout + r.stderr
    stored = _stored_images(corpus_home)
    assert len(stored) == 2, stored  # one file per content: the shared picture is stored once
    r = _run(corpus_home, "drop", "--kb", "tiny", "--yes", "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    report = json.loads(r.stdout)
    assert report["images_removed"] == 1 and report["images_kept"] == 0, report
    left = _stored_images(corpus_home)
    assert len(left) == 1 and left < stored  # the one only the dropped KB used is gone
    assert images_in_use(Layout(corpus_home)) == left  # the shared one, which the other KB uses


def test_drop_keeps_its_images_while_another_kb_is_indexed(tiny_kb, corpus_home):
    """A parse of another KB may be storing the same image (content-addressed, not rewritten
    when present): while one may run, the dropped KB's images keep their grace period."""
    (tiny_kb / "own.png").write_bytes(_png((10, 160, 10)))
    (tiny_kb / "pictures.md").write_text("# Pictures\n\n![own](own.png)\n")
    r = _run(corpus_home, "index", "--kb", "tiny")
    assert r.returncode == 0, r.stdout + r.stderr
    (corpus_home / "kbs" / "other").mkdir()
    with kb_lock(Layout(corpus_home), "other"):  # `corpus index --kb other` is running
        r = _run(corpus_home, "drop", "--kb", "tiny", "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "kept 1 image(s) only 'tiny' used while KB 'other' is being indexed" in r.stdout, r.stdout
    assert len(_stored_images(corpus_home)) == 1


def test_an_edited_and_a_deleted_documents_old_text_is_in_no_file_after_the_next_index(tiny_kb, corpus_home):
    edited_away, deleted = "PELICAN8812MARZIPAN", "OCELOT5390TURMERIC"
    (tiny_kb / "edited.md").write_text(
        f"# Edited\n\nThe kept sentence stays here.\n\nThe old badge number was {edited_away} until March.\n"
    )
    (tiny_kb / "deleted.md").write_text(f"# Deleted\n\nThe spare key is {deleted} in the blue box.\n")
    r = _run(corpus_home, "index", "--kb", "tiny")
    assert r.returncode == 0, r.stdout + r.stderr
    for needle in (edited_away, deleted):  # the scan sees the text where it is
        found = files_containing(corpus_home, needle)
        assert any(".lance" in f for f in found) and any(f.endswith(".parquet") for f in found), found
    (tiny_kb / "edited.md").write_text("# Edited\n\nThe kept sentence stays here.\n")
    (tiny_kb / "deleted.md").unlink()
    r = _run(corpus_home, "index", "--kb", "tiny")
    assert r.returncode == 0, r.stdout + r.stderr
    assert files_containing(corpus_home, edited_away) == []
    assert files_containing(corpus_home, deleted) == []
