"""GPU output parsers on recorded public outputs (tests/data/gpu/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcval.core.errors import ParseError
from hpcval.parsers import babelstream, nccl_tests, nvidia_smi, omb

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu"


def read(rel: str) -> str:
    return (DATA / rel).read_text()


def test_old_generation_xml_two_p100s() -> None:
    log = nvidia_smi.parse_nvidia_smi_xml(read("nvidia-smi/p100x2-driver375.xml"), "p100")
    assert log.driver_version == "375.66" and log.cuda_version is None
    assert [g.bus_id for g in log.gpus] == ["0000:04:00.0", "0000:82:00.0"]
    g = log.gpus[1]
    assert g.name == "Tesla P100-PCIE-12GB_2" and g.memory_total_mib == 12290
    assert (g.ecc_mode, g.ecc_volatile_uncorrected, g.ecc_aggregate_corrected) == ("Enabled", 0, 0)
    assert (g.retired_pages_sbe, g.retired_pages_dbe, g.retired_pages_pending) == (0, 0, "No")
    assert g.remapped_rows_failure is None  # a Pascal GPU has no row remapper
    assert (g.pcie_gen_current, g.pcie_gen_max, g.pcie_width_current, g.pcie_width_max) == \
        (3, 3, 16, 16)
    assert g.clocks_mhz["app_graphics"] == 1189 and g.clocks_mhz["max_sm"] == 1328
    assert g.active_reasons() == ["gpu_idle"]
    assert g.power_limit_w == 250.0


def test_new_generation_xml_event_reasons_remapped_rows_and_na() -> None:
    log = nvidia_smi.parse_nvidia_smi_xml(read("nvidia-smi/rtx4070-laptop-driver575.xml"))
    assert (log.driver_version, log.cuda_version) == ("575.51.02", "12.9")
    [g] = log.gpus
    assert g.architecture == "Ada Lovelace" and g.persistence_mode == "Enabled"
    # ECC is N/A on this GPU: unknown, never 0
    assert g.ecc_mode is None and g.ecc_volatile_uncorrected is None
    assert g.retired_pages_sbe is None
    assert (g.remapped_rows_uncorrected, g.remapped_rows_failure) == (0, "No")
    assert (g.pcie_gen_current, g.pcie_gen_max, g.pcie_width_current) == (2, 4, 8)
    assert "app_graphics" not in g.clocks_mhz  # N/A on this GPU
    assert g.clock_reasons["gpu_idle"] and not g.clock_reasons["hw_thermal_slowdown"]
    assert g.power_draw_w == 11.26


def test_edited_degraded_record_parses_its_faults() -> None:
    log = nvidia_smi.parse_nvidia_smi_xml(read("nvidia-smi/degraded-pcie-x8-hw-slowdown.xml"))
    good, bad = log.gpus
    assert (bad.pcie_gen_current, bad.pcie_width_current) == (1, 8)
    assert bad.ecc_volatile_uncorrected == 2 and good.ecc_volatile_uncorrected == 0
    assert bad.active_reasons() == ["hw_slowdown"] and bad.retired_pages_pending == "Yes"


@pytest.mark.parametrize("text, match", [
    ("", "no <nvidia_smi_log>"),
    ("nvidia-smi: command not found", "no <nvidia_smi_log>"),
    ("<nvidia_smi_log><driver_version>1</driver_version></nvidia_smi_log>", "no <gpu>"),
    ("<nvidia_smi_log><gpu id='0'><fb_memory_usage><total>lots MiB</total>"
     "</fb_memory_usage></gpu></nvidia_smi_log>", "fb_memory_usage/total"),
    ("<?xml version='1.0'?><other/>", "root element <other>"),
    ("<?xml version='1.0'?><!DOCTYPE x [<!ENTITY a 'b'>]><nvidia_smi_log/>", "entities"),
])
def test_bad_xml_is_one_clear_error(text: str, match: str) -> None:
    with pytest.raises(ParseError, match=match):
        nvidia_smi.parse_nvidia_smi_xml(text, "node1.xml")


def test_cut_xml_says_cut() -> None:
    text = read("nvidia-smi/p100x2-driver375.xml")
    with pytest.raises(ParseError, match="cut off"):
        nvidia_smi.parse_nvidia_smi_xml(text[: len(text) // 2], "node1.xml")


def test_query_csv_with_units_and_a_real_degraded_width() -> None:
    q = nvidia_smi.parse_query_csv(read("nvidia-smi-csv/rtx5060ti-x2-pcie-width-x8-of-x16.csv"))
    assert q.fields[:2] == ["index", "name"] and len(q.rows) == 2
    assert q.number(1, "pcie.link.width.current") == 8
    assert q.number(1, "pcie.link.width.max") == 16
    h200 = nvidia_smi.parse_query_csv(read("nvidia-smi-csv/h200-x4-memory.csv"))
    assert h200.units == {"memory.total": "MiB"} and h200.number(3, "memory.total") == 143771
    mixed = nvidia_smi.parse_query_csv(
        read("nvidia-smi-csv/rtx4070tisuper-memory-nounits-mixed.csv"))
    assert mixed.number(0, "memory.total") == 16376
    with pytest.raises(ParseError, match="no field 'clocks.sm'"):
        h200.number(0, "clocks.sm")


@pytest.mark.parametrize("text, match", [
    ("", "empty"),
    ("0, NVIDIA H200, 143771 MiB\n", "not a query field name"),
    ("index, name\n0\n", "1 values for 2 fields"),
    ("index, name\n", "no GPU row"),
])
def test_bad_query_csv(text: str, match: str) -> None:
    with pytest.raises(ParseError, match=match):
        nvidia_smi.parse_query_csv(text)


def test_babelstream_versions_4_and_5() -> None:
    r4 = babelstream.check_complete(babelstream.parse_babelstream(
        read("babelstream/a100-sxm4-40gb-cuda-v4.0.txt")))
    assert (r4.version, r4.device, r4.precision, r4.repetitions) == \
        ("4.0", "NVIDIA A100-SXM4-40GB", "double", 100)
    assert r4.array_mb == 268.4 and r4.rate("triad") == pytest.approx(1377425.601)
    r5 = babelstream.parse_babelstream(read("babelstream/a100-sxm4-80gb-cuda-v5.0.txt"))
    # the Init/Read lines of 5.0 are not kernels of the table
    assert list(r5.kernels) == ["Copy", "Mul", "Add", "Triad", "Dot"]
    assert r5.rate("Dot") == pytest.approx(1586905.948)


def test_babelstream_own_validation_failure_is_refused() -> None:
    r = babelstream.parse_babelstream(
        read("babelstream/bi-v100-cuda-v4.0-validation-failed.txt"), "bi")
    assert r.failures and r.rate("triad") == pytest.approx(487349.686)
    with pytest.raises(ParseError, match="failed its own validation"):
        babelstream.check_complete(r)


def test_babelstream_cut_and_foreign() -> None:
    text = read("babelstream/a100-sxm4-40gb-cuda-v4.0.txt")
    cut = text[: text.index("Triad")]
    with pytest.raises(ParseError, match="no Triad row"):
        babelstream.check_complete(babelstream.parse_babelstream(cut))
    with pytest.raises(ParseError, match="no BabelStream table"):
        babelstream.parse_babelstream(read("nccl-tests/all_reduce_perf-h100x16-2nodes.txt"))


def test_nccl_all_reduce_two_nodes_of_eight_h100() -> None:
    r = nccl_tests.check_complete(nccl_tests.parse_nccl_tests(
        read("nccl-tests/all_reduce_perf-h100x16-2nodes.txt")), size=1 << 33)
    assert len(r.devices) == 16 and {d.host for d in r.devices} == {"ztan-mig-235z",
                                                                    "ztan-mig-gq73"}
    assert r.devices[15].device == 7 and r.devices[15].name == "NVIDIA H100 80GB HBM3"
    assert r.sizes()[0] == 8 and r.sizes()[-1] == 8589934592 and len(r.rows) == 31
    assert r.busbw(1 << 33) == 338.82 and r.busbw(1 << 33, in_place=True) == 337.35
    assert r.avg_busbw == 70.742 and r.oob_ok


def test_nccl_wrong_results_cut_runs_and_labels() -> None:
    text = read("nccl-tests/all_reduce_perf-h100x16-2nodes.txt")
    wrong = text.replace("338.82      0", "338.82      3")
    with pytest.raises(ParseError, match="wrong results at 1 size"):
        nccl_tests.check_complete(nccl_tests.parse_nccl_tests(wrong))
    cut = text[: text.index("# Out of bounds")]
    with pytest.raises(ParseError, match="Avg bus bandwidth"):
        nccl_tests.check_complete(nccl_tests.parse_nccl_tests(cut))
    labelled = "\n".join(f" 0: {line}" for line in text.splitlines())
    assert nccl_tests.parse_nccl_tests(labelled).busbw(1 << 33) == 338.82
    with pytest.raises(ParseError, match="no row for 3 bytes"):
        nccl_tests.parse_nccl_tests(text).row(3)


@pytest.mark.parametrize("name", ["intranode", "internode"])
def test_osu_bw_with_cuda_device_buffers_reads_with_the_omb_parser(name: str) -> None:
    """`osu_bw -d cuda D D` prints the OMB layout under an 'OSU MPI-CUDA' title:
    the existing OMB parser reads it unchanged."""
    text = read(f"omb-cuda/osu_bw-cuda-DD-v7.5-{name}.txt")
    r = omb.check_complete(omb.parse_omb(text, name), 1 << 22, name)
    assert r.title.startswith("MPI-CUDA Bandwidth Test")
    assert r.value("bandwidth_mb_per_s", 1 << 22) > 23_000 and r.validation_failures() == []
