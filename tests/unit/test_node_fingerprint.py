"""The node's fingerprint and error counters (hpcval.node.fingerprint,
hpcval.node.counters, hpcval.node.hwtext), read from real outputs and trees
of public projects (tests/data/node/README.md names each one's source)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcval.node import hwtext
from hpcval.node.counters import read_counters
from hpcval.node.fingerprint import CATEGORIES, fingerprint, mask_cmdline, round_memory

DATA = Path(__file__).resolve().parent.parent / "data" / "node"
ROOT = Path(__file__).resolve().parent.parent.parent


def unpack_ttar(text: str, dest: Path) -> None:
    """Unpack a ttar archive (node_exporter's plain-text tree format)."""
    sep = "# ttar - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - - -\n"
    for block in text.split(sep):
        lines = block.split("\n")
        head, _, name = lines[0].partition(": ")
        if head == "Directory":
            (dest / name).mkdir(parents=True, exist_ok=True)
        elif head == "Path" and lines[1].startswith("Lines: "):
            count = int(lines[1].split()[1])
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            body = lines[2:2 + count]
            (dest / name).write_text("\n".join(body) + ("\n" if count else ""))


@pytest.fixture
def node(tmp_path: Path) -> Path:
    """node_exporter's recorded /sys (DMI, InfiniBand, EDAC, NUMA) and /proc
    (cpuinfo, meminfo, interrupts) as one node's root."""
    unpack_ttar((DATA / "sysfs" / "node_exporter-sys-excerpt.ttar").read_text(), tmp_path)
    (tmp_path / "proc").mkdir()
    shutil.copy(DATA / "cpuinfo" / "node_exporter-i7-8650u.txt", tmp_path / "proc/cpuinfo")
    shutil.copy(DATA / "sysfs" / "node_exporter-proc-meminfo.txt", tmp_path / "proc/meminfo")
    shutil.copy(DATA / "sysfs" / "node_exporter-proc-interrupts.txt",
                tmp_path / "proc/interrupts")
    return tmp_path


# -- parsers on real outputs --------------------------------------------------

def test_lscpu_of_a_two_socket_epyc() -> None:
    cpu = hwtext.parse_lscpu((DATA / "lscpu" / "util-linux-x86_64-epyc_7451.txt").read_text())
    assert cpu["model"] == "AMD EPYC 7451 24-Core Processor"
    assert (cpu["cpus"], cpu["cores"], cpu["sockets"], cpu["threads_per_core"]) == \
        ("96", "48", "2", "2")
    assert cpu["numa_nodes"] == "8"
    assert cpu["numa_cpus"].split(" | ")[0] == "0-5,48-53"
    assert hwtext.cpulist_text(hwtext.cpulist("0,1,2,5")) == "0-2,5"
    assert cpu["flags"] == "avx avx2 fma"  # no AVX-512 on Zen 1
    assert cpu["max_mhz"] == "2300"


def test_lscpu_of_avx512_and_of_a_big_little_arm() -> None:
    intel = hwtext.parse_lscpu(
        (DATA / "lscpu" / "util-linux-x86_64-64cpu-linux6.2.txt").read_text())
    assert "avx512f" in intel["flags"].split() and intel["microcode"] == "0xa6"
    arm = hwtext.parse_lscpu(
        (DATA / "lscpu" / "util-linux-arm-A510-A710-A715-X3.txt").read_text())
    # four core types, one line each: the cores of every type are counted
    assert arm["model"] == "Cortex-A510 + Cortex-A710 + Cortex-A715 + Cortex-X3"
    assert (arm["cpus"], arm["cores"], arm["threads_per_core"]) == ("8", "8", "1")


def test_cpuinfo_topology_agrees_with_what_it_lists() -> None:
    r520 = hwtext.parse_cpuinfo(
        (DATA / "cpuinfo" / "percona-linux-007-poweredge-r520.txt").read_text())
    assert r520["model"] == "Intel(R) Xeon(R) CPU E5-2430 0 @ 2.20GHz"
    assert (r520["cpus"], r520["sockets"], r520["cores"], r520["threads_per_core"]) == \
        ("24", "2", "12", "2")
    assert r520["microcode"] == "0x71a" and r520["flags"] == "avx"
    laptop = hwtext.parse_cpuinfo(
        (DATA / "cpuinfo" / "node_exporter-i7-8650u.txt").read_text())
    assert (laptop["cpus"], laptop["cores"], laptop["flags"]) == ("8", "4", "avx avx2 fma")


def test_dmidecode_memory_and_bios_without_serials() -> None:
    text = (DATA / "dmidecode" / "percona-linux-007-poweredge-r520.txt").read_text()
    mem = hwtext.parse_dmidecode_memory(text)
    assert mem == {"dimm_slots": "12", "dimms": "12", "dimm_sizes": "16384 MB x12",
                   "dimm_type": "DDR3 x12", "dimm_speed": "1333 MT/s x12",
                   "dimm_configured_speed": "1333 MT/s x12"}
    bios = hwtext.parse_dmidecode_bios(text)
    assert (bios["bios_vendor"], bios["bios_version"], bios["product_name"]) == \
        ("Dell Inc.", "2.3.3", "PowerEdge R520")
    serials = {ln.split(":", 1)[1].strip() for ln in text.splitlines()
               if "Serial Number:" in ln or "UUID:" in ln or "Asset Tag:" in ln}
    serials -= {"", "Not Specified", "Unknown"}
    assert serials and not serials & set(bios.values()) | serials & set(mem.values())
    # 4 of 24 slots populated (VirtualBox): empty slots are counted apart
    vbox = hwtext.parse_dmidecode_memory(
        (DATA / "dmidecode" / "percona-linux-005-virtualbox.txt").read_text())
    assert (vbox["dimm_slots"], vbox["dimms"], vbox["dimm_sizes"]) == \
        ("24", "4", "8192 MB x4")


# -- the fingerprint of a recorded node --------------------------------------

def test_fingerprint_of_a_recorded_node(node: Path) -> None:
    values, unknown = fingerprint(node, env={"PATH": ""})
    assert set(values) == set(CATEGORIES)
    fw = values["firmware"]
    assert (fw["bios_vendor"], fw["bios_version"], fw["product_name"]) == \
        ("Dell Inc.", "2.2.4", "PowerEdge R6515")
    # serials and UUIDs of the same directory are never read
    dmi = node / "sys/class/dmi/id"
    never = {(dmi / f).read_text().strip() for f in
             ("product_serial", "product_uuid", "board_serial", "chassis_serial")}
    flat = {v for cat in values.values() for v in cat.values()}
    assert never and not never & flat
    net = values["network"]
    assert net["ib.mlx4_0.fw_ver"] == "2.31.5050" and net["ib.mlx4_0.hca_type"] == "MT4099"
    assert net["ib.mlx4_0.1.rate"] == "40 Gb/sec (4X QDR)"
    assert net["ib.mlx4_0.1.state"] == "4: ACTIVE"
    assert values["memory"]["edac_mcs"] == "1"
    assert "edac_dimms" not in values["memory"]  # its csrows hold counts, no sizes
    assert values["cpu"]["numa_nodes"] == "3" and values["cpu"]["model"].startswith("Intel")
    # 128 GiB per socket: node0's kernel share (34 MB less) reads the same
    assert values["memory"]["numa_memory"].split(" | ")[:2] == ["128 GiB", "128 GiB"]
    # no kernel files in the recorded tree: named, not silently passed
    assert {"release", "cmdline"} <= set(unknown["kernel"])
    json.dumps([values, unknown])  # what the probe prints


def test_memory_total_rounds_to_what_is_installed() -> None:
    """The PowerEdge R520's kernel keeps back 1.6 % of its 12 x 16 GiB: the
    rounded MemTotal is the installed total dmidecode lists."""
    text = (DATA / "meminfo" / "percona-linux-007-poweredge-r520-memory.txt").read_text()
    kib = int(text.split("MemTotal:")[1].split()[0])
    dimms = hwtext.parse_dmidecode_memory(
        (DATA / "dmidecode" / "percona-linux-007-poweredge-r520.txt").read_text())
    assert dimms["dimm_sizes"] == "16384 MB x12"
    assert round_memory(kib) == f"{12 * 16} GiB"


def test_memory_total_rounding() -> None:
    # identical nodes whose kernels keep back slightly different amounts
    assert round_memory(263_749_632) == round_memory(263_600_000) == "256 GiB"
    assert round_memory(24_684_092) == "24 GiB"
    # one DIMM of eight fewer: another value
    assert round_memory(int(263_749_632 * 7 / 8)) == "224 GiB"


def unpack_grep(text: str, dest: Path) -> None:
    """A tree from ``grep -r . DIR`` output (``path:value`` lines)."""
    for line in text.splitlines():
        if line.startswith("/sys/"):
            path, _, value = line.partition(":")
            (dest / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            (dest / path.lstrip("/")).write_text(value + "\n")


def test_edac_ranks_of_a_real_controller_and_one_gone(tmp_path: Path) -> None:
    """An AMD Family 17h controller listing its DIMMs as ranks (``rank*/size``
    in MB); the recorded listing was cut after two ranks by its author."""
    unpack_grep((DATA / "sysfs" / "linux-edac-list-f17h-grep.txt").read_text(), tmp_path)
    mem = fingerprint(tmp_path, env={})[0]["memory"]
    assert (mem["edac_mcs"], mem["edac_dimms"], mem["edac_dimm_sizes"], mem["edac_mem_type"]) \
        == ("1", "2", "8192 MB x2", "Unbuffered-DDR4 x2")
    counters = read_counters(tmp_path)
    assert counters == {"memory/edac/mc0/ce": 0, "memory/edac/mc0/ce_noinfo": 0}
    # a DIMM the controller no longer sees (size 0): another fingerprint
    (tmp_path / "sys/devices/system/edac/mc/mc0/rank7/size").write_text("0\n")
    mem = fingerprint(tmp_path, env={})[0]["memory"]
    assert (mem["edac_dimms"], mem["edac_dimm_sizes"]) == ("1", "8192 MB x1")


def test_an_unreadable_file_is_named_not_raised(node: Path) -> None:
    bad = node / "sys/class/dmi/id/bios_version"
    bad.unlink()
    bad.mkdir()  # reading it fails (IsADirectoryError), as a file without permission would
    values, unknown = fingerprint(node, env={})
    assert "bios_version" in unknown["firmware"] and "bios_version" not in values["firmware"]
    assert values["firmware"]["bios_vendor"] == "Dell Inc."


def test_cmdline_masks_what_differs_by_nature() -> None:
    line = ("BOOT_IMAGE=/vmlinuz-6.1.0 root=UUID=0b1e7c3a-1f2d-4c5e-9a8b-7c6d5e4f3a2b ro "
            "BOOTIF=01-aa-bb-cc-dd-ee-ff ip=10.1.2.3::10.1.0.1:255.255.0.0 quiet")
    assert mask_cmdline(line) == ("BOOT_IMAGE=/vmlinuz-6.1.0 root=UUID=<uuid> ro "
                                  "BOOTIF=<mac> ip=<address> quiet")


def test_software_the_checks_run(tmp_path: Path) -> None:
    """The MPI of the PATH the checks run with and the Spack environment's lock."""
    prefix = tmp_path / "spack/opt/linux-x86_64/openmpi-4.1.6-abcdefg"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin/mpiexec").write_text("")
    (prefix / "lib/pkgconfig").mkdir(parents=True)
    (prefix / "lib/pkgconfig/ompi.pc").write_text("Name: Open MPI\nVersion: 4.1.6\n")
    env_dir = tmp_path / "envs/cpu"
    env_dir.mkdir(parents=True)
    lock = {"concrete_specs": {"abc123": {"name": "osu-micro-benchmarks"},
                               "def456": {"name": "openmpi"}}}
    (env_dir / "spack.lock").write_text(json.dumps(lock))
    env = {"PATH": "/spack/opt/linux-x86_64/openmpi-4.1.6-abcdefg/bin", "SPACK_ENV": "/envs/cpu"}
    sw = fingerprint(tmp_path, env=env)[0]["software"]
    assert sw["mpi"] == "ompi 4.1.6"
    assert sw["mpi_prefix"] == "/spack/opt/linux-x86_64/openmpi-4.1.6-abcdefg"
    assert sw["spack_env"] == "cpu" and len(sw["spack_lock"]) == 16
    # Intel MPI installed by pip into a virtual environment: the wheel's version
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin/mpiexec").write_text("")
    (venv / "lib/python3.11/site-packages/impi_rt-2021.18.1.dist-info").mkdir(parents=True)
    assert fingerprint(tmp_path, env={"PATH": "/venv/bin"})[0]["software"]["mpi"] == \
        "impi_rt 2021.18.1"
    lock["concrete_specs"]["def457"] = lock["concrete_specs"].pop("def456")  # rebuilt
    (env_dir / "spack.lock").write_text(json.dumps(lock))
    assert fingerprint(tmp_path, env=env)[0]["software"]["spack_lock"] != sw["spack_lock"]


def test_mounts_default_and_configured(node: Path) -> None:
    (node / "proc/mounts").write_text(
        "sysfs /sys sysfs rw 0 0\nproc /proc proc rw 0 0\n/dev/sda1 / ext4 rw 0 0\n"
        "tmpfs /run tmpfs rw 0 0\nfs1:/home /home nfs4 rw 0 0\n"
        "10.0.0.1@o2ib:/scratch /lus/scratch lustre rw 0 0\n")
    values = fingerprint(node, env={})[0]
    assert values["mounts"] == {"/": "ext4", "/home": "nfs4", "/lus/scratch": "lustre"}
    wanted = fingerprint(node, mounts=["/home", "/apps"], env={})[0]
    assert wanted["mounts"] == {"/home": "nfs4", "/apps": "absent"}


# -- counters -----------------------------------------------------------------

def test_counters_of_a_recorded_node(node: Path) -> None:
    counters = read_counters(node)
    assert counters["memory/edac/mc0/ce"] == 1
    assert counters["memory/edac/mc0/ce_noinfo"] == 2
    assert counters["memory/edac/mc0/ue"] == 5
    assert counters["memory/edac/mc0/ue_noinfo"] == 6
    assert counters["network/ib/mlx4_0/1/link_downed"] == 0
    assert counters["network/ib/mlx4_0/1/port_rcv_errors"] == 0
    # the counter exists, the device reads "N/A (no PMA)": unreadable
    assert counters["network/ib/i40iw0/1/symbol_error"] is None
    assert counters["cpu/mce/exceptions/count"] == 0
    assert counters["cpu/mce/threshold/count"] == 0
    assert not [n for n in counters if n.startswith("network/nic/")]  # no /sys/class/net


def test_nic_counters_of_physical_interfaces_only(node: Path) -> None:
    for iface, physical in (("eth0", True), ("lo", True), ("veth1a2b3c", False)):
        stats = node / "sys/class/net" / iface / "statistics"
        stats.mkdir(parents=True)
        (stats / "rx_errors").write_text("7\n")
        (stats / "tx_errors").write_text("0\n")
        if physical:
            (node / "sys/class/net" / iface / "device").mkdir()
    nic = {n: v for n, v in read_counters(node).items() if n.startswith("network/nic/")}
    assert nic == {"network/nic/eth0/rx_errors": 7, "network/nic/eth0/tx_errors": 0}


def test_counters_rise_and_vanish(node: Path) -> None:
    (node / "sys/devices/system/edac/mc/mc0/ue_count").write_text("6\n")
    assert read_counters(node)["memory/edac/mc0/ue"] == 6
    shutil.rmtree(node / "sys/devices/system/edac")  # no EDAC driver: no name at all
    assert not [n for n in read_counters(node) if n.startswith("memory/")]


# -- this machine, through the probe ------------------------------------------

@pytest.mark.skipif(shutil.which("lscpu") is None, reason="util-linux's lscpu")
def test_lscpu_and_the_fingerprint_agree_on_this_machine() -> None:
    said = hwtext.parse_lscpu(subprocess.run(["lscpu"], capture_output=True, text=True,
                                             check=True, env={"LC_ALL": "C"}).stdout)
    cpu = fingerprint(env={})[0]["cpu"]
    for key in ("model", "vendor", "cpus", "cores", "sockets", "threads_per_core", "flags",
                "numa_nodes", "numa_cpus"):
        if key in said:
            assert cpu[key] == said[key], key


def test_the_probe_prints_them_fast() -> None:
    t0 = time.perf_counter()
    values, unknown = fingerprint()
    read_counters()
    took = time.perf_counter() - t0
    assert values["kernel"]["release"] and values["cpu"]["cpus"]
    # "*": a reader failed on something other than an unreadable file (its own fault)
    assert not [c for c, keys in unknown.items() if "*" in keys], unknown
    assert took < 2.0, f"fingerprint and counters took {took:.2f} s"  # < 0.2 s unloaded
    out = subprocess.run([sys.executable, "-m", "hpcval.vet.probe", "--samples", "1",
                          "--interval", "0"], capture_output=True, text=True, check=True,
                         cwd=ROOT).stdout
    probe = json.loads(out.split("HPCVAL-VET-PROBE ", 1)[1])
    assert set(probe["fingerprint"]) == set(CATEGORIES)
    assert isinstance(probe["fingerprint_unknown"], dict)
    assert all(v is None or isinstance(v, int) for v in probe["counters"].values())
