"""The Slurm release every image builds — version, source tarball and its sha256 — pinned in this one place.

Read by the config's default (`images.slurm_version`), by the image recipe (stacks/images.py passes them to the
component's build script) and by the local cloud, which builds its image root from the same bytes with the same
script (localcloud/image/image_root.py). The source is SchedMD's own: GitHub's archive of the release tag
(`slurm-26-05-3-1`), which is reproducible byte for byte from the tag (`git archive --prefix=slurm-slurm-26-05-3-1/
slurm-26-05-3-1 | gzip -cn`) and carries SchedMD's committed `configure` and META, so it builds like a release
tarball (its top directory is `slurm-slurm-26-05-3-1/`). AWS build instances download the URL; a machine that cannot
reach it (an air-gapped site, the test machines) finds the same bytes in a source mirror directory
(localcloud.image.image_root.source_tarball). The build stops on any other content (build-slurm.sh checks the sha256).
A config that wants another release names it in `images.slurm_source` with its sha256.
"""

from __future__ import annotations

VERSION = "26.05.3"
TAG = "slurm-" + VERSION.replace(".", "-") + "-1"  # SchedMD's release tag: slurm-26-05-3-1
SOURCE_URL = f"https://github.com/SchedMD/slurm/archive/refs/tags/{TAG}.tar.gz"
SOURCE_SHA256 = "eeb2508a6307ecb08b385bc33e31497d4fc2e5c0c186a988f74b86ffb4bf38bf"
SOURCE_NAME = SOURCE_URL.rsplit("/", 1)[-1]  # the file name in a download cache or a source mirror
