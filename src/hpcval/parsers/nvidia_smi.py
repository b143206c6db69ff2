"""Parser for what ``nvidia-smi`` reports about a node's GPUs.

Two formats:

* ``nvidia-smi -q -x``: one ``<nvidia_smi_log>`` document with the driver
  and CUDA versions and one ``<gpu id="BUS-ID">`` element per GPU. Its tags
  changed over driver generations, and the parser reads each generation:

  - ECC counts: ``volatile/single_bit/total`` and ``double_bit/total``
    (Kepler to Volta drivers, e.g. 375), or ``sram_correctable``,
    ``sram_uncorrectable`` (later split into ``_parity``/``_secded``),
    ``dram_correctable``, ``dram_uncorrectable`` (Ampere and later drivers);
  - clock reasons: ``clocks_throttle_reasons/clocks_throttle_reason_*``
    (drivers before 535) or ``clocks_event_reasons/clocks_event_reason_*``;
  - power: ``power_readings/power_draw`` or ``gpu_power_readings/
    power_draw`` (later ``instant_power_draw``), limit ``power_limit`` or
    ``current_power_limit``;
  - retired pages (before Ampere) and ``remapped_rows`` (Ampere and later).

  ``N/A`` (and the drivers' ``Requested functionality has been deprecated``)
  is read as unknown (:obj:`None`), never as zero.

* ``nvidia-smi --query-gpu=FIELDS --format=csv[,nounits]``: a header naming the
  fields (with the unit in brackets, ``memory.total [MiB]``) and one row per
  GPU; :func:`parse_query_csv` returns one dict per GPU keyed by field name.

Anything that is not one of these — not XML, another root element, no GPU, a
number that is not a number, a CSV row with the wrong count of values — raises
:class:`~hpcval.core.errors.ParseError` naming the source and the element.
"""

from __future__ import annotations

import csv
import io
import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from hpcval.core.errors import ParseError

#: Largest ``nvidia-smi -q -x`` document read (a node with 8 GPUs and every
#: supported clock listed is ~0.5 MB).
MAX_BYTES = 16 << 20

#: Values nvidia-smi prints for "not known here".
_UNKNOWN = {"", "n/a", "[n/a]", "not supported", "[not supported]", "unknown error",
            "requested functionality has been deprecated", "[unknown error]"}

#: Clock reasons as the audit names them, from either tag generation.
REASONS = ("gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
           "hw_thermal_slowdown", "hw_power_brake_slowdown", "sync_boost",
           "sw_thermal_slowdown", "display_clocks_setting", "unknown")

_NUMBER_RE = re.compile(r"^\s*(?P<n>[-+]?\d+(?:\.\d+)?)\s*(?P<unit>[A-Za-z%/]*)\s*$")


@dataclass
class Gpu:
    """One GPU of a ``nvidia-smi -q -x`` report."""

    #: Position in the report (nvidia-smi lists GPUs by PCI bus id, which is
    #: also the default CUDA_DEVICE_ORDER=PCI_BUS_ID index).
    index: int
    bus_id: str
    name: str = ""
    uuid: str | None = None
    serial: str | None = None
    architecture: str | None = None
    minor_number: int | None = None
    persistence_mode: str | None = None
    performance_state: str | None = None
    ecc_mode: str | None = None
    ecc_pending: str | None = None
    #: Corrected / uncorrected ECC errors since the driver loaded (volatile)
    #: and over the GPU's life (aggregate); None where not reported.
    ecc_volatile_corrected: int | None = None
    ecc_volatile_uncorrected: int | None = None
    ecc_aggregate_corrected: int | None = None
    ecc_aggregate_uncorrected: int | None = None
    retired_pages_sbe: int | None = None
    retired_pages_dbe: int | None = None
    retired_pages_pending: str | None = None
    remapped_rows_corrected: int | None = None
    remapped_rows_uncorrected: int | None = None
    remapped_rows_pending: str | None = None
    remapped_rows_failure: str | None = None
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    pcie_replay_counter: int | None = None
    memory_total_mib: float | None = None
    power_draw_w: float | None = None
    power_limit_w: float | None = None
    temperature_c: float | None = None
    #: MHz: ``sm``, ``mem``, ``graphics`` (current), ``app_graphics``,
    #: ``app_mem``, ``default_app_graphics``, ``default_app_mem``,
    #: ``max_sm``, ``max_mem``, ``max_graphics``.
    clocks_mhz: dict[str, float] = field(default_factory=dict)
    #: Clock reason → active (True) or not; reasons the driver does not report
    #: are absent.
    clock_reasons: dict[str, bool] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"GPU {self.index} ({self.bus_id})"

    def active_reasons(self) -> list[str]:
        return [r for r, active in self.clock_reasons.items() if active]


@dataclass
class NvidiaSmiLog:
    """One ``nvidia-smi -q -x`` report."""

    source: str
    driver_version: str | None
    cuda_version: str | None
    gpus: list[Gpu]


def _text(node: ET.Element | None, path: str) -> str | None:
    if node is None:
        return None
    el = node.find(path)
    if el is None or el.text is None:
        return None
    value = " ".join(el.text.split())
    return None if value.lower() in _UNKNOWN else value


def _number(node: ET.Element | None, path: str, where: str) -> float | None:
    value = _text(node, path)
    if value is None:
        return None
    m = _NUMBER_RE.match(value.rstrip("x"))
    if not m:
        raise ParseError(f"{where}: <{path}> is {value!r}, not a number")
    number = float(m.group("n"))
    if not math.isfinite(number):
        raise ParseError(f"{where}: <{path}> is {value!r}, not a finite number")
    return number


def _count(node: ET.Element | None, path: str, where: str) -> int | None:
    number = _number(node, path, where)
    if number is None:
        return None
    if number < 0 or number != int(number):
        raise ParseError(f"{where}: <{path}> is {number!r}, not a count")
    return int(number)


def _sum(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _ecc(gpu: ET.Element, kind: str, where: str) -> tuple[int | None, int | None]:
    """(corrected, uncorrected) of ``volatile`` or ``aggregate``."""
    node = gpu.find(f"ecc_errors/{kind}")
    if node is None:
        return None, None
    if node.find("single_bit") is not None or node.find("double_bit") is not None:
        return (_count(node, "single_bit/total", where),
                _count(node, "double_bit/total", where))
    corrected: list[int | None] = []
    uncorrected: list[int | None] = []
    for child in node:
        tag = child.tag
        if tag.endswith("_correctable"):
            corrected.append(_count(node, tag, where))
        elif "_uncorrectable" in tag:
            uncorrected.append(_count(node, tag, where))
    return _sum(corrected), _sum(uncorrected)


def _reasons(gpu: ET.Element) -> dict[str, bool]:
    reasons: dict[str, bool] = {}
    for group, prefix in (("clocks_event_reasons", "clocks_event_reason_"),
                          ("clocks_throttle_reasons", "clocks_throttle_reason_")):
        node = gpu.find(group)
        if node is None:
            continue
        for child in node:
            if not child.tag.startswith(prefix):
                continue
            value = " ".join((child.text or "").split()).lower()
            if value in ("active", "not active"):
                reasons[child.tag[len(prefix):]] = value == "active"
    return reasons


_CLOCKS = {
    "sm": "clocks/sm_clock", "mem": "clocks/mem_clock", "graphics": "clocks/graphics_clock",
    "app_graphics": "applications_clocks/graphics_clock",
    "app_mem": "applications_clocks/mem_clock",
    "default_app_graphics": "default_applications_clocks/graphics_clock",
    "default_app_mem": "default_applications_clocks/mem_clock",
    "max_sm": "max_clocks/sm_clock", "max_mem": "max_clocks/mem_clock",
    "max_graphics": "max_clocks/graphics_clock",
}


def _gpu(index: int, node: ET.Element, source: str) -> Gpu:
    bus_id = node.get("id") or _text(node, "pci/pci_bus_id") or f"#{index}"
    where = f"{source}: GPU {index} ({bus_id})"
    gpu = Gpu(index=index, bus_id=bus_id, name=_text(node, "product_name") or "",
              uuid=_text(node, "uuid"), serial=_text(node, "serial"),
              architecture=_text(node, "product_architecture"),
              minor_number=_count(node, "minor_number", where),
              persistence_mode=_text(node, "persistence_mode"),
              performance_state=_text(node, "performance_state"),
              ecc_mode=_text(node, "ecc_mode/current_ecc"),
              ecc_pending=_text(node, "ecc_mode/pending_ecc"))
    gpu.ecc_volatile_corrected, gpu.ecc_volatile_uncorrected = _ecc(node, "volatile", where)
    gpu.ecc_aggregate_corrected, gpu.ecc_aggregate_uncorrected = _ecc(node, "aggregate", where)
    gpu.retired_pages_sbe = _count(
        node, "retired_pages/multiple_single_bit_retirement/retired_count", where)
    gpu.retired_pages_dbe = _count(node, "retired_pages/double_bit_retirement/retired_count",
                                   where)
    gpu.retired_pages_pending = _text(node, "retired_pages/pending_retirement")
    gpu.remapped_rows_corrected = _count(node, "remapped_rows/remapped_row_corr", where)
    gpu.remapped_rows_uncorrected = _count(node, "remapped_rows/remapped_row_unc", where)
    gpu.remapped_rows_pending = _text(node, "remapped_rows/remapped_row_pending")
    gpu.remapped_rows_failure = _text(node, "remapped_rows/remapped_row_failure")
    link = "pci/pci_gpu_link_info"
    gpu.pcie_gen_current = _count(node, f"{link}/pcie_gen/current_link_gen", where)
    gpu.pcie_gen_max = _count(node, f"{link}/pcie_gen/max_link_gen", where)
    gpu.pcie_width_current = _count(node, f"{link}/link_widths/current_link_width", where)
    gpu.pcie_width_max = _count(node, f"{link}/link_widths/max_link_width", where)
    gpu.pcie_replay_counter = _count(node, "pci/replay_counter", where)
    gpu.memory_total_mib = _number(node, "fb_memory_usage/total", where)
    gpu.temperature_c = _number(node, "temperature/gpu_temp", where)
    for path in ("gpu_power_readings/power_draw", "gpu_power_readings/instant_power_draw",
                 "power_readings/power_draw"):
        if (draw := _number(node, path, where)) is not None:
            gpu.power_draw_w = draw
            break
    for path in ("gpu_power_readings/current_power_limit", "power_readings/power_limit",
                 "power_readings/enforced_power_limit"):
        if (limit := _number(node, path, where)) is not None:
            gpu.power_limit_w = limit
            break
    for key, path in _CLOCKS.items():
        if (mhz := _number(node, path, where)) is not None:
            gpu.clocks_mhz[key] = mhz
    gpu.clock_reasons = _reasons(node)
    return gpu


def parse_nvidia_smi_xml(text: str, source: str = "nvidia-smi -q -x output") -> NvidiaSmiLog:
    """Parse the XML report of ``nvidia-smi -q -x``."""
    if len(text) > MAX_BYTES:
        raise ParseError(f"{source}: {len(text)} bytes, more than any nvidia-smi report "
                         f"({MAX_BYTES} read at most): not nvidia-smi output")
    start = text.find("<?xml")
    if start < 0:
        start = text.find("<nvidia_smi_log")
    if start < 0:
        raise ParseError(f"{source}: no <nvidia_smi_log> document: not the output of "
                         "'nvidia-smi -q -x' (is nvidia-smi installed and a GPU visible?)")
    end = text.rfind("</nvidia_smi_log>")
    body = text[start:end + len("</nvidia_smi_log>")] if end > start else text[start:]
    if "<!ENTITY" in body:
        raise ParseError(f"{source}: the document declares entities, which nvidia-smi "
                         "never does: refused")
    try:
        root = ET.fromstring(body)
    except ET.ParseError as err:
        raise ParseError(f"{source}: not well-formed XML ({err}): the report is cut off or "
                         "mixed with other output") from None
    if root.tag != "nvidia_smi_log":
        raise ParseError(f"{source}: root element <{root.tag}>, not <nvidia_smi_log>")
    gpus = [_gpu(i, node, source) for i, node in enumerate(root.findall("gpu"))]
    if not gpus:
        raise ParseError(f"{source}: the report lists no <gpu>: no GPU visible to the driver")
    return NvidiaSmiLog(source, _text(root, "driver_version"), _text(root, "cuda_version"),
                        gpus)


@dataclass
class QueryResult:
    """``nvidia-smi --query-gpu=... --format=csv``: the fields, their units and
    one dict of values per GPU (units stripped, ``N/A`` → None)."""

    source: str
    fields: list[str]
    units: dict[str, str]
    rows: list[dict[str, str | None]]

    def number(self, row: int, name: str) -> float | None:
        """Field ``name`` of GPU row ``row`` as a number (None when unknown)."""
        if name not in self.fields:
            raise ParseError(f"{self.source}: no field {name!r} (queried: "
                             f"{', '.join(self.fields)})")
        value = self.rows[row][name]
        if value is None:
            return None
        m = _NUMBER_RE.match(value)
        if not m or not math.isfinite(float(m.group("n"))):
            raise ParseError(f"{self.source}: row {row + 1}: {name} is {value!r}, not a number")
        return float(m.group("n"))


_HEADER_FIELD_RE = re.compile(r"^(?P<name>[a-z][a-z0-9_.]*)(?:\s*\[(?P<unit>[^\]]*)\])?$")


def parse_query_csv(text: str, source: str = "nvidia-smi --query-gpu output") -> QueryResult:
    """Parse ``nvidia-smi --query-gpu=FIELDS --format=csv`` (with or without
    ``nounits``; ``noheader`` cannot be read: the fields are named by the header)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise ParseError(f"{source}: empty: nvidia-smi printed nothing")
    try:
        rows = list(csv.reader(io.StringIO("\n".join(lines)), skipinitialspace=True))
    except csv.Error as err:
        raise ParseError(f"{source}: not CSV: {err}") from None
    fields: list[str] = []
    units: dict[str, str] = {}
    for cell in rows[0]:
        m = _HEADER_FIELD_RE.match(cell.strip())
        if not m:
            raise ParseError(f"{source}: line 1: {cell.strip()!r} is not a query field name: "
                             "run with --format=csv (not noheader)")
        fields.append(m.group("name"))
        if m.group("unit"):
            units[m.group("name")] = m.group("unit")
    if len(set(fields)) != len(fields):
        raise ParseError(f"{source}: line 1: a field is named twice")
    out: list[dict[str, str | None]] = []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != len(fields):
            raise ParseError(f"{source}: line {number}: {len(row)} values for {len(fields)} "
                             "fields: a cut or wrapped row")
        values: dict[str, str | None] = {}
        for name, cell in zip(fields, row, strict=True):
            value = cell.strip()
            unit = units.get(name)
            if unit and value.endswith(unit):
                value = value[: -len(unit)].strip()
            values[name] = None if value.lower() in _UNKNOWN else value
        out.append(values)
    if not out:
        raise ParseError(f"{source}: a header and no GPU row: no GPU visible to the driver")
    return QueryResult(source, fields, units, out)
