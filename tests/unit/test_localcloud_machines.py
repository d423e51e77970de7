"""An emulated instance's own accounts and name service (localcloud/instances/machines.py): copies of the image's taken when it
boots, bound over the root's, and kept from then on, so a user added to the image root later is not the instance's."""

from __future__ import annotations

from pathlib import Path

from localcloud.instances import machines
from localcloud.layout import Layout

PASSWD = "root:x:0:0:root:/root:/bin/bash\nesuser:x:2001:2001::/home/esuser:/bin/sh\n"


def _root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "passwd").write_text(PASSWD)
    (root / "etc" / "group").write_text("root:x:0:\nesuser:x:2001:\n")
    (root / "etc" / "nsswitch.conf").write_text("passwd: files\ngroup: files\n")
    return root


def test_an_instance_binds_its_own_copies_of_the_images_accounts_and_name_service(tmp_path: Path) -> None:
    root, layout = _root(tmp_path), Layout(tmp_path / "state")
    view = machines.instance_view(layout, root, "i-1", "127.16.0.4")
    own = {inside: Path(host) for host, inside in view.binds if inside.startswith("/etc/")}
    assert set(own) >= {"/etc/passwd", "/etc/group", "/etc/nsswitch.conf", "/etc/nss_slurm.conf", "/etc/hosts"}
    machine = layout.machine_dir("i-1")
    assert all(own[f"/etc/{name}"].is_relative_to(machine) for name in ("passwd", "group", "nss_slurm.conf"))
    assert own["/etc/passwd"].read_text() == PASSWD
    assert own["/etc/nss_slurm.conf"].read_text() == ""  # nss_slurm's defaults until the bootstrap writes it


def test_a_user_added_to_the_image_root_after_the_boot_is_not_the_running_instances(tmp_path: Path) -> None:
    root, layout = _root(tmp_path), Layout(tmp_path / "state")
    machines.instance_view(layout, root, "i-1")
    with (root / "etc" / "passwd").open("a") as passwd:  # in place, as the e2e test adds its user
        passwd.write("ghost:x:2002:2002::/home/ghost:/bin/sh\n")
    again = machines.instance_view(layout, root, "i-1")  # a later view of the same instance (its disk)
    own = {inside: Path(host) for host, inside in again.binds}
    assert "ghost" not in own["/etc/passwd"].read_text()
    later = machines.instance_view(layout, root, "i-2")  # an instance booted after the user was added has it
    assert "ghost" in {inside: Path(host) for host, inside in later.binds}["/etc/passwd"].read_text()
