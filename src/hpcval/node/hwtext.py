"""Parsers of what a node says about its hardware in text: ``/proc/cpuinfo``,
``lscpu``, ``dmidecode`` (BIOS and memory devices), CPU lists (``0-5,48-53``).

Each returns the fingerprint's own keys (strings), so a node read through
``/proc`` and ``/sys`` (:mod:`hpcval.node.fingerprint`) and one described by
``lscpu`` or ``dmidecode`` compare key by key. Values that differ by nature
(serial numbers, asset tags, UUIDs, part numbers, locators) are never kept.
Tested on real outputs of public projects (``tests/data/node/``).
"""

from __future__ import annotations

import re
from collections import Counter

#: CPU flags that decide what code runs fast (vector width, matrix units,
#: virtualised or not); the fingerprint keeps these of the flag list.
FLAGS_THAT_MATTER = (
    "avx", "avx2", "fma", "avx512f", "avx512dq", "avx512cd", "avx512bw", "avx512vl",
    "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8",
    "amx_fp16", "asimd", "sve", "sve2", "sme", "vsx", "hypervisor",
)


def cpulist(text: str) -> list[int]:
    """CPUs of a kernel CPU list (``0-5,48-53``; empty text: none)."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


def cpulist_text(cpus: list[int]) -> str:
    """The kernel's form of a CPU list (runs as ``a-b``): ``lscpu`` writes a run
    of two as ``0,1`` where ``/sys`` writes ``0-1``; both compare in this form."""
    runs: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(f"{a}-{b}" if b > a else f"{a}" for a, b in runs)


def flags_that_matter(flags: str) -> str:
    """The :data:`FLAGS_THAT_MATTER` among ``flags`` (space separated), sorted."""
    have = set(flags.split())
    return " ".join(f for f in sorted(FLAGS_THAT_MATTER) if f in have)


def counted(values: list[str]) -> str:
    """``"16384 MB x12"`` (several values: each with its count, most first)."""
    return ", ".join(f"{v} x{n}" for v, n in sorted(Counter(values).items(),
                                                     key=lambda kv: (-kv[1], kv[0])))


def parse_cpuinfo(text: str) -> dict[str, str]:
    """The CPU keys of ``/proc/cpuinfo``: ``model``, ``vendor``, ``microcode``,
    ``cpus``, and where it tells the topology (x86: ``physical id``, ``core
    id``) ``sockets``, ``cores``, ``threads_per_core``; ``flags`` that matter."""
    blocks = [b for b in re.split(r"\n\s*\n", text) if b.strip()]
    procs: list[dict[str, str]] = []
    for block in blocks:
        fields: dict[str, str] = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields.setdefault(key.strip().lower(), value.strip())
        if "processor" in fields and fields["processor"].isdigit():
            procs.append(fields)
    out: dict[str, str] = {}
    if not procs:
        return out
    out["cpus"] = str(len(procs))
    first = procs[0]
    model = first.get("model name") or first.get("cpu") or ""
    if not model and "cpu part" in first:  # arm64: implementer and part numbers
        parts = sorted({f"{p.get('cpu implementer', '?')}/{p.get('cpu part', '?')}"
                        for p in procs})
        model = "arm " + " + ".join(parts)
    if model:
        out["model"] = " ".join(model.split())
    vendor = first.get("vendor_id") or first.get("cpu implementer")
    if vendor:
        out["vendor"] = vendor
    micro = sorted({p["microcode"] for p in procs if "microcode" in p})
    if micro:
        out["microcode"] = " ".join(micro)
    flags = first.get("flags") or first.get("features")
    if flags is not None:
        out["flags"] = flags_that_matter(flags)
    if all("physical id" in p and "core id" in p for p in procs):
        sockets = {p["physical id"] for p in procs}
        cores = {(p["physical id"], p["core id"]) for p in procs}
        out["sockets"] = str(len(sockets))
        out["cores"] = str(len(cores))
        out["threads_per_core"] = str(len(procs) // len(cores))
    return out


def parse_lscpu(text: str) -> dict[str, str]:
    """The CPU keys of ``lscpu``'s default output (the same as
    :func:`parse_cpuinfo`'s, plus ``numa_nodes``, ``numa_cpus`` and
    ``max_mhz``). A machine of several core types (big.LITTLE) lists one block
    per type: models are joined with `` + `` and cores summed."""
    out: dict[str, str] = {}
    models: list[str] = []
    cores = sockets_max = 0
    per = 1
    threads: set[str] = set()
    numa: dict[int, str] = {}
    max_mhz: list[float] = []
    for line in text.splitlines():
        if line.startswith("#") or ":" not in line:
            if not line.strip():
                if models:
                    break  # the parsable tables that follow in some outputs
            continue
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "Model name":
            models.append(" ".join(value.split()))
        elif key == "Vendor ID":
            out.setdefault("vendor", value)
        elif key == "CPU(s)":
            out.setdefault("cpus", value)
        elif key in ("Microcode version", "Microcode"):
            out["microcode"] = value
        elif key == "Thread(s) per core":
            threads.add(value)
        elif key == "Core(s) per socket" or key == "Core(s) per cluster":
            per = int(value)
        elif key in ("Socket(s)", "Cluster(s)") and value.isdigit():
            cores += per * int(value)
            sockets_max = max(sockets_max, int(value))
        elif key == "NUMA node(s)":
            out["numa_nodes"] = value
        elif (m := re.fullmatch(r"NUMA node(\d+) CPU\(s\)", key)):
            numa[int(m.group(1))] = value
        elif key == "CPU max MHz":
            max_mhz.append(float(value))
        elif key == "Flags":
            out["flags"] = flags_that_matter(value)
    if models:
        out["model"] = " + ".join(dict.fromkeys(models))
    if cores:
        out["cores"] = str(cores)
        out["sockets"] = str(sockets_max)
    if len(threads) == 1:
        out["threads_per_core"] = threads.pop()
    if numa:
        out["numa_cpus"] = " | ".join(cpulist_text(cpulist(numa[n])) for n in sorted(numa))
    if max_mhz:
        out["max_mhz"] = f"{max(max_mhz):.0f}"
    return out


def dmi_records(text: str) -> list[tuple[int, str, dict[str, str]]]:
    """``dmidecode``'s records: (DMI type, title, ``{field: value}``); the
    fields' values stripped, list-valued fields (indented twice) left out."""
    records: list[tuple[int, str, dict[str, str]]] = []
    for block in re.split(r"\n\s*\n", text):
        lines = block.splitlines()
        head = next((i for i, ln in enumerate(lines) if ln.startswith("Handle ")), None)
        if head is None or head + 1 >= len(lines):
            continue
        m = re.search(r"DMI type (\d+)", lines[head])
        if not m:
            continue
        fields: dict[str, str] = {}
        for line in lines[head + 2:]:
            if line.startswith("\t\t") or not line.startswith(("\t", " ")):
                continue
            key, sep, value = line.strip().partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        records.append((int(m.group(1)), lines[head + 1].strip(), fields))
    return records


def _size_mb(size: str) -> int | None:
    m = re.fullmatch(r"(\d+)\s*(kB|KB|MB|GB|TB)", size)
    if not m:
        return None
    scale = {"kB": 1 / 1024, "KB": 1 / 1024, "MB": 1, "GB": 1024, "TB": 1024 * 1024}
    return int(int(m.group(1)) * scale[m.group(2)])


def parse_dmidecode_memory(text: str) -> dict[str, str]:
    """The memory keys of ``dmidecode -t memory`` (type 17 records):
    ``dimm_slots``, ``dimms`` (populated), ``dimm_sizes`` (``"16384 MB x12"``),
    ``dimm_type``, ``dimm_speed`` (rated) and ``dimm_configured_speed``."""
    devices = [f for t, _, f in dmi_records(text) if t == 17]
    out: dict[str, str] = {}
    if not devices:
        return out
    populated = [d for d in devices if _size_mb(d.get("Size", "")) is not None]
    out["dimm_slots"] = str(len(devices))
    out["dimms"] = str(len(populated))
    if populated:
        out["dimm_sizes"] = counted([f"{_size_mb(d['Size'])} MB" for d in populated])
        for key, names in (("dimm_type", ("Type",)), ("dimm_speed", ("Speed",)),
                           ("dimm_configured_speed", ("Configured Memory Speed",
                                                      "Configured Clock Speed"))):
            values = [next((d[n] for n in names if n in d), "") for d in populated]
            values = [re.sub(r"\s*\(.*\)$", "", v) for v in values if v]
            if values:
                out[key] = counted(values)
    return out


#: BIOS record fields kept, by fingerprint key
_BIOS = {"Vendor": "bios_vendor", "Version": "bios_version", "Release Date": "bios_date",
         "BIOS Revision": "bios_release", "Firmware Revision": "ec_firmware"}


def parse_dmidecode_bios(text: str) -> dict[str, str]:
    """The firmware keys of ``dmidecode -t bios`` (type 0; the names of
    ``/sys/class/dmi/id``: ``bios_vendor``, ``bios_version``, ``bios_date``,
    ``bios_release``) and of the system and board records (``sys_vendor``,
    ``product_name``, ``board_vendor``, ``board_name``, ``board_version``)."""
    out: dict[str, str] = {}
    for dtype, _, fields in dmi_records(text):
        if dtype == 0:
            out.update({key: fields[name] for name, key in _BIOS.items() if fields.get(name)})
        elif dtype == 1:
            out.update({key: fields[name] for name, key in
                        (("Manufacturer", "sys_vendor"), ("Product Name", "product_name"))
                        if fields.get(name)})
        elif dtype == 2:
            out.update({key: fields[name] for name, key in
                        (("Manufacturer", "board_vendor"), ("Product Name", "board_name"),
                         ("Version", "board_version")) if fields.get(name)})
    return out
