"""The Slurm release every image builds — version, source tarball and its sha256 — pinned in this one place.

Read by the config's default (`images.slurm_version`), by the image recipe (stacks/images.py passes them to the
component's build script) and by the local cloud, which builds its image root from the same bytes with the same
script (localcloud/image_root.py). The source is Debian's copy of the upstream release (`slurm-wlm_<v>.orig.tar.gz`,
SchedMD's git tag as released), whose sha256 is listed in Debian's signed Sources index for trixie: it is the one copy
both AWS build instances and the machines `make test` runs on reach, so the tests build exactly what the AMI builds.
A config that wants another release (or SchedMD's own tarball) names it in `images.slurm_source` with its sha256.
"""

from __future__ import annotations

VERSION = "24.11.5"
SOURCE_URL = f"https://deb.debian.org/debian/pool/main/s/slurm-wlm/slurm-wlm_{VERSION}.orig.tar.gz"
SOURCE_SHA256 = "e1a5547edd212c38b5e3230a284133f777b32746551f094aaa81cc4af375e332"
