"""Where the image build's Slurm source comes from (localcloud.image.image_root.source_tarball): the download cache, then the
source mirror directory, then the release's URL — each copy used only with the pinned sha256 — and one line naming the
file, its checksum and every place looked at when none has it."""

from __future__ import annotations

import hashlib
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from localcloud.image import image_root

TARBALL = b"slurm source bytes\n"
SHA256 = hashlib.sha256(TARBALL).hexdigest()
NAME = "slurm-26-05-3-1.tar.gz"
CLOSED_URL = f"http://127.0.0.1:9/archive/{NAME}"  # the discard port: nothing answers, a download fails at once


@pytest.fixture
def mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "mirror"
    directory.mkdir()
    monkeypatch.setenv(image_root.SOURCE_MIRROR_ENV, str(directory))
    return directory


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """A web server on 127.0.0.1 serving TARBALL under /archive/NAME; yields the file's URL."""
    root = tmp_path / "web"
    (root / "archive").mkdir(parents=True)
    (root / "archive" / NAME).write_bytes(TARBALL)

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__(*args, directory=str(root), **kwargs)  # type: ignore[arg-type]

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/archive/{NAME}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_mirror_copy_is_cached_when_the_cache_has_none(tmp_path: Path, mirror: Path) -> None:
    (mirror / NAME).write_bytes(TARBALL)
    path = image_root.source_tarball(tmp_path / "cache", CLOSED_URL, SHA256)
    assert path == tmp_path / "cache" / "sources" / NAME
    assert path.read_bytes() == TARBALL
    assert sorted(p.name for p in path.parent.iterdir()) == [NAME]  # no partial copy left


def test_the_cached_copy_is_used_before_the_mirror(tmp_path: Path, mirror: Path) -> None:
    cached = tmp_path / "cache" / "sources" / NAME
    cached.parent.mkdir(parents=True)
    cached.write_bytes(TARBALL)
    (mirror / NAME).write_bytes(b"another release\n")
    assert image_root.source_tarball(tmp_path / "cache", CLOSED_URL, SHA256).read_bytes() == TARBALL


def test_a_cached_copy_with_another_checksum_is_replaced_from_the_mirror(tmp_path: Path, mirror: Path) -> None:
    cached = tmp_path / "cache" / "sources" / NAME
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"truncated")
    (mirror / NAME).write_bytes(TARBALL)
    assert image_root.source_tarball(tmp_path / "cache", CLOSED_URL, SHA256).read_bytes() == TARBALL


def test_the_url_is_downloaded_when_neither_cache_nor_mirror_has_it(tmp_path: Path, mirror: Path, served: str) -> None:
    path = image_root.source_tarball(tmp_path / "cache", served, SHA256)
    assert path.read_bytes() == TARBALL
    assert sorted(p.name for p in path.parent.iterdir()) == [NAME]


def test_a_download_with_another_checksum_is_refused(tmp_path: Path, mirror: Path, served: str) -> None:
    wrong = "0" * 64
    with pytest.raises(image_root.ImageBuildError) as caught:
        image_root.source_tarball(tmp_path / "cache", served, wrong)
    assert f"{served} (its content has another sha256)" in str(caught.value)
    assert list((tmp_path / "cache" / "sources").iterdir()) == []


def test_a_missing_tarball_is_one_line_naming_the_file_its_checksum_and_where_it_looked(
    tmp_path: Path, mirror: Path
) -> None:
    (mirror / NAME).write_bytes(b"a mirror copy with another checksum is not used\n")
    with pytest.raises(image_root.ImageBuildError) as caught:
        image_root.source_tarball(tmp_path / "cache", CLOSED_URL, SHA256)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"no Slurm source {NAME} with sha256 {SHA256}: looked in ")
    for place in (f"{tmp_path / 'cache' / 'sources'}/", f"{mirror}/", CLOSED_URL):
        assert place in message


def test_the_mirror_defaults_to_shared_sources_beside_the_checkout_when_it_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(image_root.SOURCE_MIRROR_ENV, raising=False)
    beside = tmp_path / "shared" / "sources"
    monkeypatch.setattr(image_root, "DEFAULT_SOURCE_MIRROR", beside)
    assert image_root.source_mirror() is None
    beside.mkdir(parents=True)
    assert image_root.source_mirror() == beside
    monkeypatch.setenv(image_root.SOURCE_MIRROR_ENV, str(tmp_path / "site-mirror"))
    assert image_root.source_mirror() == tmp_path / "site-mirror"  # the operator's directory wins


def test_another_source_is_cached_under_its_own_name_and_named_by_what_it_is(tmp_path: Path, mirror: Path) -> None:
    """The bench's ParallelCluster source (bench/parallelcluster/source.py): a tag archive whose URL ends in a bare
    `v3.11.0.tar.gz` is looked up and cached under the name given, and a miss names what was looked for."""
    url = "http://127.0.0.1:9/archive/refs/tags/v3.11.0.tar.gz"
    name = "aws-parallelcluster-node-3.11.0.tar.gz"
    with pytest.raises(image_root.ImageBuildError) as caught:
        image_root.source_tarball(tmp_path / "cache", url, SHA256, name=name, what="ParallelCluster source")
    assert str(caught.value).startswith(f"no ParallelCluster source {name} with sha256 {SHA256}: looked in ")
    (mirror / name).write_bytes(TARBALL)
    found = image_root.source_tarball(tmp_path / "cache", url, SHA256, name=name, what="ParallelCluster source")
    assert found == tmp_path / "cache" / "sources" / name
    assert found.read_bytes() == TARBALL
