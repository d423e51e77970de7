"""aws-parallelcluster-node's source for the side-by-side bench: a pinned tag archive, checked and extracted once.

The tarball comes from the first of the root cache's `sources/`, the source mirror directory
(`$ELASTIC_SLURM_SOURCE_MIRROR`) and GitHub's tag archive, its sha256 checked (localcloud.image.image_root
source_tarball, as for Slurm's source); it is extracted into `<root cache>/parallelcluster/`.
"""

from __future__ import annotations

import shutil
import tarfile
import tempfile
from pathlib import Path

from localcloud.image.image_root import source_tarball

# ParallelCluster 3.11.1's node package is 3.11.0's code (its CHANGELOG: "3.11.1 — There were no changes for this
# version."; `git diff v3.11.0 <3.11.1 changelog commit> -- src` is empty), so the tag archive of v3.11.0 is what
# 3.11.1 runs. sha256 of `git archive --prefix=aws-parallelcluster-node-3.11.0/ v3.11.0 | gzip -cn`, which is what
# GitHub's tag archive serves (../shared/reference/slurm-source.md); computed from a clone, not cross-checked elsewhere.
VERSION = "3.11.0"
SOURCE_URL = f"https://github.com/aws/aws-parallelcluster-node/archive/refs/tags/v{VERSION}.tar.gz"
SOURCE_SHA256 = "d007b11952cc0cb998b203096f1e94f615f6a80db4ad5bd1aa2cbccf87da2075"
TARBALL = f"aws-parallelcluster-node-{VERSION}.tar.gz"


def source_dir(cache: Path) -> Path:
    """The extracted source tree (with `src/slurm_plugin`), under `cache`/parallelcluster; extracted on first use."""
    target = cache / "parallelcluster" / f"aws-parallelcluster-node-{VERSION}"
    if (target / "src" / "slurm_plugin" / "instance_manager.py").is_file():
        return target
    tarball = source_tarball(cache, SOURCE_URL, SOURCE_SHA256, name=TARBALL, what="ParallelCluster source")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp, tarfile.open(tarball) as archive:
        archive.extractall(tmp, filter="data")
        shutil.rmtree(target, ignore_errors=True)
        (Path(tmp) / target.name).rename(target)
    return target
