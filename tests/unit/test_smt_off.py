"""assets/bootstrap/elastic-slurm-smt-off (a pool's disable_hyperthreading), executed on fake sysfs CPU trees: the
sibling threads of each core go offline, the first thread stays, a second run changes nothing; and the local cloud's
copy of the host's tree (localcloud/instances/fake_sysfs.py) is what the script then works on."""

from __future__ import annotations

import subprocess
from pathlib import Path

from localcloud.instances import fake_sysfs

SCRIPT = Path(__file__).resolve().parents[2] / "assets" / "bootstrap" / "elastic-slurm-smt-off"


def cpu_tree(root: Path, siblings: dict[int, str], without_online: tuple[int, ...] = (0,)) -> Path:
    """cpuN/online (1) and cpuN/topology/thread_siblings_list for each CPU; cpu0 has no `online` file, as on x86."""
    for cpu, listed in siblings.items():
        (root / f"cpu{cpu}" / "topology").mkdir(parents=True)
        (root / f"cpu{cpu}" / "topology" / "thread_siblings_list").write_text(listed + "\n")
        if cpu not in without_online:
            (root / f"cpu{cpu}" / "online").write_text("1\n")
    (root / "cpufreq").mkdir()  # not a CPU
    return root


def run(root: Path) -> str:
    result = subprocess.run(
        [str(SCRIPT)], env={"PATH": "/usr/bin:/bin", "ES_SYSFS_CPU": str(root)}, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def online(root: Path) -> dict[int, str]:
    return {
        int(p.parent.name[3:]): p.read_text().strip() for p in root.glob("cpu*/online") if p.parent.name[3:].isdigit()
    }


def test_two_cores_of_two_threads_keep_their_first_threads(tmp_path: Path) -> None:
    root = cpu_tree(tmp_path, {0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3"})
    assert run(root) == "elastic-slurm-smt-off: took 2 sibling thread(s) offline (cpu2 cpu3), 2 CPUs online\n"
    assert online(root) == {1: "1", 2: "0", 3: "0"}


def test_a_second_run_changes_nothing(tmp_path: Path) -> None:
    root = cpu_tree(tmp_path, {0: "0-1", 1: "0-1", 2: "2-3", 3: "2-3"})
    run(root)
    assert online(root) == {1: "0", 2: "1", 3: "0"}
    assert run(root) == "elastic-slurm-smt-off: no sibling thread online, nothing to do (2 CPUs online)\n"
    assert online(root) == {1: "0", 2: "1", 3: "0"}


def test_cpus_without_siblings_stay_online(tmp_path: Path) -> None:
    root = cpu_tree(tmp_path, {0: "0", 1: "1"})
    assert run(root) == "elastic-slurm-smt-off: no sibling thread online, nothing to do (2 CPUs online)\n"
    assert online(root) == {1: "1"}


def test_cpus_are_taken_in_numeric_order_past_cpu9(tmp_path: Path) -> None:
    # cpu10 sorts before cpu2 as text: the core 2,10 must keep cpu2
    siblings = {cpu: str(cpu) for cpu in range(12)} | {2: "2,10", 10: "2,10"}
    root = cpu_tree(tmp_path, siblings)
    assert "(cpu10)" in run(root)
    assert online(root)[2] == "1" and online(root)[10] == "0"


def test_the_local_clouds_copy_of_the_host_tree_is_what_the_script_changes(tmp_path: Path) -> None:
    host = cpu_tree(tmp_path / "host", {0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3"})
    machine = tmp_path / "machine"
    inside = fake_sysfs.cpu_tree(machine, host)
    assert inside == "/run/elastic-slurm-sysfs-cpu"
    copy = machine / "run" / "elastic-slurm-sysfs-cpu"
    assert sorted(p.name for p in copy.iterdir()) == ["cpu0", "cpu1", "cpu2", "cpu3"]
    run(copy)
    assert online(copy) == {1: "1", 2: "0", 3: "0"}
    assert online(host) == {1: "1", 2: "1", 3: "1"}  # the host's own tree is untouched
