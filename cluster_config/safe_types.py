"""Constrained strings for config values that reach a root shell, an fstab, a systemd file, slurm.conf, an Image Builder
step or an SSM command (docs/security.md, "Config values at the sinks").

Each type is a strict pattern (plus a check where a pattern cannot say it), so `elastic-slurm validate` refuses a
value that could be anything but data where it lands: no blanks, quotes, `$`, backticks, `;`, `#`, `%`, backslashes,
control characters or look-alike Unicode in paths, ARNs, mount options and schedules. The sinks quote or refuse again
(defence in depth): stacks/user_data.py (the env file, fstab lines), slurm_plugin/licenses/units.py (the timer
drop-in), lambdas/deconfigure (the SSM command), cluster_config/slurm_syntax.py (slurm.conf values).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator, Field

from cluster_config.model_base import cidr

# ---------------------------------------------------------------- paths
# A path segment: letters, digits and `._+@-` (no blank, quote, `$`, `%`, `\`, `#`, glob or control character).
PATH_PATTERN = r"^(/[A-Za-z0-9._+@-]+)+$"
# Mount points that would hide the operating system, the product or its state (exactly these, or anything below the
# ones in RESERVED_TREES).
RESERVED_TREES = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/opt/elastic-slurm",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
    "/var/lib",
    "/var/log",
    "/var/run",
    "/var/spool",
)
RESERVED_EXACT = frozenset({"/opt", "/var", "/tmp", "/var/tmp", "/snap", "/lost+found"})


def _plain_path(value: object) -> object:
    """A readable refusal of what PATH_PATTERN refuses (before pydantic's own message, which shows the regex)."""
    if isinstance(value, str) and not re.fullmatch(PATH_PATTERN, value):
        raise ValueError(
            f"{shown(value)} is not a mount point: an absolute path of letters, digits and ._+@- separated by single "
            "'/' (no blank, quote, '$', '%', '#' or trailing '/')"
        )
    return value


def shown(value: str, limit: int = 80) -> str:
    """A value as an error message shows it: quoted, escaped, cut after `limit` characters."""
    text = repr(value[:limit])
    return text + "..." if len(value) > limit else text


def mount_point(value: str) -> str:
    """A mount point: no `.` or `..` segment, not a system or product directory (the pattern did the characters)."""
    segments = value.split("/")[1:]
    if any(segment in (".", "..") for segment in segments):
        raise ValueError(f"{shown(value)}: a mount point has no '.' or '..' segment")
    if value in RESERVED_EXACT or any(value == tree or value.startswith(tree + "/") for tree in RESERVED_TREES):
        raise ValueError(
            f"{shown(value)} would hide a system or elastic-slurm directory; mount elsewhere (e.g. /shared)"
        )
    return value


MountPoint = Annotated[
    str,
    BeforeValidator(_plain_path),
    Field(pattern=PATH_PATTERN, max_length=255, description="An absolute path of letters, digits and ._+@-"),
    AfterValidator(mount_point),
]

# ---------------------------------------------------------------- fstab fields (fstab(5): blank-separated fields)
# Comma-separated mount options, e.g. `nfsvers=4.1,_netdev` (no blank or `#`, which would shift or cut the line).
FSTAB_OPTIONS_PATTERN = r"^[A-Za-z0-9_.=:/@+-]+(,[A-Za-z0-9_.=:/@+-]+)*$"
FstabOptions = Annotated[str, Field(pattern=FSTAB_OPTIONS_PATTERN, max_length=512)]
# A file system type as mount -t takes it: nfs4, lustre, cifs, fuse.sshfs.
FS_TYPE_PATTERN = r"^[a-z0-9]+(\.[a-z0-9_-]+)?$"
FsType = Annotated[str, Field(pattern=FS_TYPE_PATTERN, max_length=64)]
# What to mount: host:/export, [fd00::1]:/export, 10.0.0.5@tcp:/fsname, //server/share, UUID=...
MOUNT_SOURCE_PATTERN = r"^[A-Za-z0-9_.:/@\[\]=+-]+$"
MountSource = Annotated[str, Field(pattern=MOUNT_SOURCE_PATTERN, max_length=512)]

# ---------------------------------------------------------------- AWS identifiers
# Secrets Manager: a secret name has ASCII letters, digits and /_+=.@- (CreateSecret, Name:
# https://docs.aws.amazon.com/secretsmanager/latest/apireference/API_CreateSecret.html); the ARN adds `-` and six
# random characters.
SECRET_ARN_PATTERN = r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+$"
SecretArn = Annotated[str, Field(pattern=SECRET_ARN_PATTERN, max_length=2048)]
# An S3 URI: a bucket name (3-63 lowercase letters, digits, '.' and '-', starting and ending with a letter or digit:
# https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html) and a key of S3's "safe characters"
# less those a shell treats specially (https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-keys.html).
S3_URI_PATTERN = r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[A-Za-z0-9_./=+-]*)?$"
S3Uri = Annotated[str, Field(pattern=S3_URI_PATTERN, max_length=1024)]
# An HTTPS URL (the Slurm source tarball; an Image Builder step passes it in single quotes): no quote, blank,
# backslash or `$`.
HTTPS_URL_PATTERN = r"^https://[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[A-Za-z0-9._~%+=:@/?&,-]*)?$"
HttpsUrl = Annotated[str, Field(pattern=HTTPS_URL_PATTERN, max_length=2048)]
# Image Builder schedule expressions: cron(...) or rate(...).
SCHEDULE_EXPRESSION_PATTERN = r"^(cron\([0-9A-Za-z*?,/#L -]+\)|rate\([0-9]+ [a-z]+\))$"
ScheduleExpression = Annotated[str, Field(pattern=SCHEDULE_EXPRESSION_PATTERN, max_length=256)]


# ---------------------------------------------------------------- security group rules
def rule_cidr(value: str) -> str:
    """A CIDR a security group rule takes (model_base.cidr: checked and normalised), without the zone index Python's
    ipaddress accepts in IPv6 (`fe80::1%eth0`), which would reach the rule and its description."""
    if "%" in value:
        raise ValueError(f"{shown(value)} is not a CIDR: a zone index ('%...') has no meaning in a security group rule")
    return cidr(value)


RuleCidrList = list[Annotated[str, AfterValidator(rule_cidr)]]  # IPv4 or IPv6 CIDRs of security group rules

# ---------------------------------------------------------------- systemd
# A systemd calendar expression (systemd.time(7), "Calendar Events"): `*:0/5`, `Mon..Fri 08:00`, `daily`,
# `*-*-* 02:30:00 Europe/Berlin`. No `%` (a systemd specifier), `\`, `;`, `#` or control character; blanks inside only.
SYSTEMD_CALENDAR_PATTERN = r"^[A-Za-z0-9*:.,/~_+-]+( [A-Za-z0-9*:.,/~_+-]+)*$"
SystemdCalendar = Annotated[str, Field(pattern=SYSTEMD_CALENDAR_PATTERN, max_length=128)]

# ---------------------------------------------------------------- free text
# Unicode categories refused in free text: control (Cc: NUL, newline, CR, ESC ...), format (Cf: zero-width space,
# RTL override, BOM), line and paragraph separators (Zl, Zp), unassigned and private use.
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def one_line_text(value: str) -> str:
    """Free text that prints as what it says: one line, no control, invisible or direction-changing character."""
    for char in value:
        if unicodedata.category(char) in _UNSAFE_CATEGORIES:
            raise ValueError(
                f"character U+{ord(char):04X} ({unicodedata.name(char, 'unnamed')}) is not allowed: one line of "
                "visible text"
            )
    return value


SafeText = Annotated[str, Field(max_length=256), AfterValidator(one_line_text)]

# AWS tags: keys 1-128 and values 0-256 Unicode letters, digits, spaces and _.:/=+-@; no key starts with `aws:` (Tag, Key and
# Value: https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_Tag.html and "Tag restrictions",
# https://docs.aws.amazon.com/tag-editor/latest/userguide/best-practices-and-strats.html).
_TAG_PUNCTUATION = frozenset("_.:/=+-@ ")


def _tag_text(value: str, what: str) -> str:
    for char in value:
        if char not in _TAG_PUNCTUATION and unicodedata.category(char)[0] not in "LN":
            raise ValueError(
                f"{what} {shown(value)}: AWS allows letters, digits, spaces and _.:/=+-@ only, not U+{ord(char):04X}"
            )
    return value


def tag_key(value: str) -> str:
    """An AWS tag key (see above)."""
    if value.lower().startswith("aws:"):
        raise ValueError(f"tag key {shown(value)}: the aws: prefix is reserved for AWS")
    return _tag_text(value, "tag key")


def tag_value(value: str) -> str:
    """An AWS tag value (see above)."""
    return _tag_text(value, "tag value")


TagKey = Annotated[str, Field(min_length=1, max_length=128), AfterValidator(tag_key)]
TagValue = Annotated[str, Field(max_length=256), AfterValidator(tag_value)]
Tags = dict[TagKey, TagValue]
