"""Which local root a config's `images.slurm_version` runs on (localcloud.image.slurm_root): the pinned release on the image
root the image component's scripts build, the older release a site may still run on Debian 13's packaged Slurm, and a
one-line refusal for anything else."""

from __future__ import annotations

import pytest

from cluster_config import slurm_release
from localcloud.image import image_root, slurm_root


def test_the_pinned_release_runs_on_the_image_root_built_from_source() -> None:
    rel = slurm_root.release_of(slurm_release.VERSION)
    assert (rel.major, rel.suite, rel.image) == (slurm_root.DEFAULT_SLURM, image_root.SUITE, True)
    assert slurm_release.VERSION.startswith(rel.major + ".")
    assert slurm_root.root_path(rel.major).name.startswith(f"image-{slurm_release.VERSION}-trixie-")


def test_the_older_release_runs_on_debian_13s_packaged_slurm() -> None:
    rel = slurm_root.release_of(f"{slurm_root.OLDER_SLURM}.5")
    assert (rel.major, rel.suite, rel.image) == (slurm_root.OLDER_SLURM, "trixie", False)
    assert slurm_root.root_path(rel.major).name.startswith(f"slurm-{slurm_root.OLDER_SLURM}-trixie-")
    assert sorted(slurm_root.RELEASES) == sorted({slurm_root.DEFAULT_SLURM, slurm_root.OLDER_SLURM})


def test_the_older_release_is_older_than_the_pinned_one() -> None:
    def numbers(version: str) -> tuple[int, ...]:
        return tuple(int(part) for part in version.split("."))

    assert numbers(slurm_root.OLDER_SLURM) < numbers(slurm_root.DEFAULT_SLURM)


def test_another_point_release_of_the_pinned_major_is_refused_in_one_line() -> None:
    other = f"{slurm_root.DEFAULT_SLURM}.99"
    with pytest.raises(slurm_root.RootError) as caught:
        slurm_root.release_of(other)
    assert str(caught.value) == (
        f"images.slurm_version: the local cloud runs {slurm_root.DEFAULT_SLURM} as the image's"
        f" {slurm_release.VERSION}, not {other}"
    )


def test_an_unsupported_release_names_the_choices() -> None:
    with pytest.raises(slurm_root.RootError) as caught:
        slurm_root.release_of("23.02.7")
    assert str(caught.value) == (
        f"slurm_version: 23.02 is not supported here (choose {slurm_root.DEFAULT_SLURM}, {slurm_root.OLDER_SLURM})"
    )
