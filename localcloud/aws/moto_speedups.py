"""Speed-ups of moto's EC2 emulation that change no answer, installed in the emulated AWS server process.

Lookups by id that walk everything the region holds, which made the emulator quadratic in its instance count
(the first two measured with 10,000 instances for bench/scale_10k.py, see bench/README.md):

- one resource's tags (`TaggedEC2Resource.get_tags`) go through `describe_tags`, which matches every tag of every
  resource against a regular expression. DescribeInstances calls it for each instance it filters by tag and for each
  instance it answers (the `tagSet`): a 2500-instance answer took 13 s with 2500 instances in the region and over
  60 s with 10,000. `indexed_tags` reads moto's own tag store (`TagBackend.tags`, id -> {key: value}) instead; the
  records keep `describe_tags`' shape and order. The DescribeTags API itself is unchanged.
- one instance by id (`InstanceBackend.get_instance`, which RunInstances calls for every instance it creates, to
  attach its root volume, and TerminateInstances for every instance it ends) scans every instance. `indexed_instance`
  keeps an id -> instance index, filled from the reservations as they grow (moto never removes an instance from a
  reservation, nor a reservation), and raises moto's own error for an unknown id.
- one image by id (`AmiBackend.describe_images(filters={"image-id": id})`, which every new instance calls to read
  its image's architecture and root device): moto matches the id against every image of the region (~1,300 in its
  default set) with fnmatch. `image_by_id` answers that one form from moto's own `amis` dict; any other form (ids,
  owners, users, other filters, a glob pattern) goes to moto's own code.
- one volume by id (`EBSBackend.describe_volumes(volume_ids=[id])`, which RunInstances calls for every instance it
  creates, to read back the root volume it just made): moto keeps every volume of the region in a list it filters by
  id. `volume_by_id` answers that one form from moto's own `volumes` dict (id -> volume), with moto's error for an
  unknown id; any other form goes to moto's own code.

And one scan: a DescribeInstances with a `tag:KEY` filter runs moto's generic filter (regular expressions per value)
at every instance of the region. `tag_prefiltered` first keeps the instances whose KEY tag, read from moto's tag store,
is one of the filter's values, when no value holds a pattern character (then moto's match is plain equality), and
hands those to moto's own filter, which still applies every filter.

And one translation: a filter value to its regular expression (`moto.ec2.utils.simple_aws_filter_to_re`, fnmatch's
translate), which DescribeInstances redoes for each value of a tag filter at each instance of the region it
filters. The function is pure (a string to a string), so `install` keeps its answers (functools.lru_cache).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

_INSTALLED = "_elastic_slurm_indexed"
_INDEX = "_elastic_slurm_instance_index"  # on an EC2 backend: instance id -> instance
_INDEXED_UPTO = "_elastic_slurm_indexed_upto"  # on an EC2 backend: reservation id -> instances indexed


def indexed_tags(resource: Any) -> list[dict[str, str]]:
    """The tags of one moto EC2 resource, as `describe_tags(filters={"resource-id": [id]})` lists them."""
    from moto.ec2.utils import EC2_PREFIX_TO_RESOURCE, get_prefix

    resource_id = getattr(resource, "id", None)
    if not resource_id:
        return []
    store: dict[str, dict[str, str]] = resource.ec2_backend.tags
    own = dict(store.get(resource_id, {}))  # `get`: the store is a defaultdict; a read must not add an entry
    kind = EC2_PREFIX_TO_RESOURCE.get(get_prefix(resource_id), "")
    return [
        {"resource_id": resource_id, "key": key, "value": value, "resource_type": kind} for key, value in own.items()
    ]


def indexed_instance(backend: Any, instance_id: str) -> Any:
    """The instance with `instance_id` (moto's InvalidInstanceIdError when there is none), as `get_instance` finds it.

    The index lives on the backend with, per reservation, how many of its instances are indexed; a miss indexes what
    was added since, newest reservation first (a new instance is in the newest), before giving up."""
    from moto.ec2.exceptions import InvalidInstanceIdError

    index: dict[str, Any] = backend.__dict__.setdefault(_INDEX, {})
    found = index.get(instance_id)
    if found is not None:
        return found
    done: dict[str, int] = backend.__dict__.setdefault(_INDEXED_UPTO, {})
    for reservation in reversed(list(backend.reservations.values())):
        members = list(reservation.instances)
        for instance in members[done.get(reservation.id, 0) :]:
            index[instance.id] = instance
        done[reservation.id] = len(members)
        if instance_id in index:
            return index[instance_id]
    raise InvalidInstanceIdError(instance_id)


GLOB = frozenset("*?[")  # what makes an image-id filter value a pattern for moto's fnmatch


def image_by_id(describe_images: Callable[..., list[Any]]) -> Callable[..., list[Any]]:
    """moto's `describe_images`, answering `filters={"image-id": <one plain id>}` (and nothing else) by a dict
    lookup: the image with that id, or none — what fnmatch against each image id gives for a value without a
    pattern character."""

    def describe(
        backend: Any,
        ami_ids: list[str] | None = None,
        filters: dict[str, Any] | None = None,
        exec_users: list[str] | None = None,
        owners: list[str] | None = None,
    ) -> list[Any]:
        wanted = (filters or {}).get("image-id")
        values = [wanted] if isinstance(wanted, str) else wanted
        if (
            not ami_ids and not exec_users and not owners and filters is not None and len(filters) == 1
            and isinstance(values, list) and len(values) == 1 and isinstance(values[0], str)
            and not GLOB.intersection(values[0])
        ):  # fmt: skip
            found = backend.amis.get(values[0])
            return [] if found is None else [found]
        return describe_images(backend, ami_ids, filters, exec_users, owners)

    return describe


def volume_by_id(describe_volumes: Callable[..., list[Any]]) -> Callable[..., list[Any]]:
    """moto's `describe_volumes`, answering `volume_ids=[<one id>]` without filters by a dict lookup."""

    def describe(backend: Any, volume_ids: list[str] | None = None, filters: Any = None) -> list[Any]:
        if isinstance(volume_ids, list) and len(volume_ids) == 1 and not filters:
            from moto.ec2.exceptions import InvalidVolumeIdError

            found = backend.volumes.get(volume_ids[0])
            if found is None:
                raise InvalidVolumeIdError(set(volume_ids))
            return [found]
        return describe_volumes(backend, volume_ids, filters)

    return describe


def tag_prefiltered(
    filter_reservations: Callable[[list[Any], Any], list[Any]],
) -> Callable[[list[Any], Any], list[Any]]:
    """moto's `filter_reservations(reservations, filters)` after dropping, from the (copied) reservations, instances
    whose tag fails a `tag:KEY` filter of plain values; what is left goes through moto's own filter."""

    def filtered(reservations: list[Any], filter_dict: Any) -> list[Any]:
        plain = [
            (name[4:], frozenset(values))
            for name, values in (filter_dict or {}).items()
            if isinstance(name, str) and name.startswith("tag:") and isinstance(values, list)
            and all(isinstance(v, str) and not GLOB.intersection(v) for v in values)
        ]  # fmt: skip
        for reservation in reservations if plain else ():
            reservation.instances = [
                instance for instance in reservation.instances
                if all(instance.ec2_backend.tags.get(instance.id, {}).get(key) in wanted for key, wanted in plain)
            ]  # fmt: skip
        return filter_reservations(reservations, filter_dict)

    return filtered


def install() -> None:
    """Make moto read a resource's tags, an instance, an image and a volume by id, filter instances by tag from its tag
    store first, and translate a filter value once (idempotent)."""
    from moto.ec2 import utils as ec2_utils
    from moto.ec2.models import instances as instances_module
    from moto.ec2.models.amis import AmiBackend
    from moto.ec2.models.core import TaggedEC2Resource
    from moto.ec2.models.elastic_block_store import EBSBackend
    from moto.ec2.models.instances import InstanceBackend

    if getattr(TaggedEC2Resource, _INSTALLED, False):
        return
    TaggedEC2Resource.get_tags = indexed_tags  # type: ignore[method-assign,assignment]
    InstanceBackend.get_instance = indexed_instance  # type: ignore[method-assign,assignment]
    AmiBackend.describe_images = image_by_id(AmiBackend.describe_images)  # type: ignore[method-assign]
    EBSBackend.describe_volumes = volume_by_id(EBSBackend.describe_volumes)  # type: ignore[method-assign]
    ec2_utils.simple_aws_filter_to_re = functools.lru_cache(maxsize=4096)(ec2_utils.simple_aws_filter_to_re)
    instances_module.filter_reservations = tag_prefiltered(instances_module.filter_reservations)  # type: ignore[attr-defined,assignment]
    setattr(TaggedEC2Resource, _INSTALLED, True)
