"""GPU partitions in the site model (hpcval.node.gpus, hpcval site new), from the
recorded ``nvidia-smi --query-gpu`` outputs of tests/data/gpu (fed as text: no
GPU is pretended to run)."""

from __future__ import annotations

import runpy
import shutil
import sys
from pathlib import Path

import pytest

from hpcval.core.errors import InputError
from hpcval.node.gpus import (
    ASSUMED_L2_BYTES,
    arch_of,
    babelstream_array_elements,
    node_gpus,
    read_query,
)
from hpcval.parsers.nvidia_smi import parse_query_csv
from hpcval.site.scaffold import SlurmPartition, config_text, new_site

CSV = Path(__file__).resolve().parents[1] / "data" / "gpu" / "nvidia-smi-csv"
GiB = 1 << 30


def test_h200_node_in_reframe_terms() -> None:
    gpus = read_query(CSV / "h200-x4-memory.csv")
    assert gpus.count == 4
    assert gpus.devices() == [{"type": "gpu", "num_devices": 4, "arch": "sm_90"}]
    assert gpus.extras() == {"gpu_model": "NVIDIA H200", "gpu_memory_bytes": 143771 << 20}
    assert gpus.partition_fields()["features"] == ["gpu", "nvidia"]


def test_a100_node_and_a_value_pasted_without_its_unit() -> None:
    a100 = read_query(CSV / "a100-80gb-x8-memory-driver.csv")
    assert a100.models == (("NVIDIA A100-SXM4-80GB", "sm_80", 8),)
    assert a100.memory_bytes == 81920 << 20
    rtx = read_query(CSV / "rtx4070tisuper-memory-nounits-mixed.csv")
    assert rtx.devices() == [{"type": "gpu", "num_devices": 1, "arch": "sm_89"}]
    assert rtx.memory_bytes == 16376 << 20


def test_compute_cap_field_wins_over_the_name_and_unknown_models_get_no_arch() -> None:
    assert arch_of("NVIDIA H100 80GB HBM3", "9.0") == "sm_90"
    assert arch_of("NVIDIA GeForce RTX 5060 Ti", None) == "sm_120"
    assert arch_of("Some Future GPU", None) is None
    text = "index, name, compute_cap\n0, Some Future GPU, 11.2\n1, Some Future GPU, 11.2\n"
    assert node_gpus(parse_query_csv(text)).devices() == [
        {"type": "gpu", "num_devices": 2, "arch": "sm_112"}]


def test_a_query_without_names_is_wrong_input_naming_the_query() -> None:
    with pytest.raises(InputError, match=r"l40s-x8-idle-pcie.csv: the query has no 'name' "
                                         r"field: run nvidia-smi --query-gpu=index,name"):
        read_query(CSV / "l40s-x8-idle-pcie.csv")
    with pytest.raises(InputError, match="cannot read the GPU query"):
        read_query(CSV / "missing.csv")


def _config(text: str, tmp_path: Path) -> dict:
    site = tmp_path / "site-configs" / "g"
    site.mkdir(parents=True)
    (site / "config.py").write_text(text)
    return runpy.run_path(str(site / "config.py"))["site_configuration"]


def test_local_config_carries_the_gpus(tmp_path: Path) -> None:
    gpus = read_query(CSV / "h200-x4-memory.csv")
    conf = _config(config_text("g", "local", [], gpus), tmp_path)
    (part,) = conf["systems"][0]["partitions"]
    assert part["features"] == ["gpu", "nvidia"]
    assert part["devices"] == [{"type": "gpu", "num_devices": 4, "arch": "sm_90"}]
    assert part["extras"]["gpu_model"] == "NVIDIA H200"
    # the site directory: the one route to the site's files (references included)
    assert part["extras"]["site_dir"] == str((tmp_path / "site-configs" / "g").resolve())
    plain = _config(config_text("g", "local", []), tmp_path / "plain")
    assert "devices" not in plain["systems"][0]["partitions"][0]


def test_slurm_config_gives_the_gpus_to_the_named_partition_only(tmp_path: Path) -> None:
    gpus = read_query(CSV / "a100-80gb-x8-memory-driver.csv")
    parts = [SlurmPartition("cpu", 4, 64), SlurmPartition("gpu-a100", 2, 128)]
    conf = _config(config_text("g", "squeue", parts, gpus, ("gpu-a100",)), tmp_path)
    cpu, gpu = conf["systems"][0]["partitions"]
    assert "devices" not in cpu and "gpu" not in cpu["features"]
    assert gpu["features"] == ["internode", "slurm", "gpu", "nvidia"]
    assert gpu["devices"] == [{"type": "gpu", "num_devices": 8, "arch": "sm_80"}]
    with pytest.raises(InputError, match="--gpu-partition gpu-h100: no such Slurm partition"):
        config_text("g", "squeue", parts, gpus, ("gpu-h100",))


def test_new_site_writes_a_gpu_partition_from_a_recorded_query(tmp_path: Path) -> None:
    gpus = read_query(CSV / "h200-x4-memory.csv")
    written = new_site("gpusite", root=tmp_path, scheduler="local", gpus=gpus)
    config = next(p for p in written if p.name == "config.py")
    assert '"devices": [{\'type\': \'gpu\', \'num_devices\': 4, \'arch\': \'sm_90\'}]' in \
        config.read_text()
    with pytest.raises(InputError, match="--gpu-partition needs Slurm partitions"):
        new_site("other", root=tmp_path, scheduler="local", gpus=gpus,
                 gpu_partitions=("gpu",))


def test_gpus_of_a_slurm_machine_need_their_partition(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Where sinfo answers, --gpus-csv without --gpu-partition would give the GPUs
    to no partition: refused, naming the partitions, before any file is written."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool, text in (("sinfo", "echo 'cpu 4 64'\necho 'gpu 2 128'"),
                       ("sacct", "exit 1")):  # a Slurm without accounting, not this machine's
        (bin_dir / tool).write_text(f"#!/bin/sh\n{text}\n")
        (bin_dir / tool).chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    gpus = read_query(CSV / "h200-x4-memory.csv")
    with pytest.raises(InputError, match=r"--gpus-csv: .*\(sinfo shows cpu, gpu\): .*"
                       r"--gpu-partition NAME, or give --scheduler local"):
        new_site("slurmgpus", root=tmp_path, gpus=gpus)
    assert not (tmp_path / "site-configs" / "slurmgpus").exists()
    written = new_site("slurmgpus", root=tmp_path, gpus=gpus, gpu_partitions=("gpu",))
    config = next(p for p in written if p.name == "config.py").read_text()
    assert config.count("'num_devices': 4") == 1


def test_babelstream_arrays_beat_the_l2_and_fit_the_memory() -> None:
    # H100: 80 GB, 50 MiB L2 -> 1 GiB arrays (4 x L2 is less)
    assert babelstream_array_elements(80 * GiB, 50 << 20) == GiB // 8
    # undeclared L2: the 128 MiB bound, 4x of which is still under 1 GiB
    assert babelstream_array_elements(80 * GiB, None) == GiB // 8
    # a large L2: 4x of it
    assert babelstream_array_elements(80 * GiB, 512 << 20) == (2 * GiB) // 8
    # a small GPU: a sixth of its memory, still above 4x the L2
    assert babelstream_array_elements(4 * GiB, 4 << 20) == (4 * GiB // 6) // 8
    assert 4 * ASSUMED_L2_BYTES <= GiB
    with pytest.raises(InputError, match="do not fit in half of the device memory"):
        babelstream_array_elements(2 * GiB, 256 << 20)


def test_a_program_built_with_cuda_is_told_from_one_without() -> None:
    from hpcval.rfm.gpu import links_cuda

    imb_gpu = Path(sys.executable).parent / "IMB-MPI1-GPU"  # Intel MPI wheel, CUDA-enabled
    if imb_gpu.is_file():
        assert links_cuda(str(imb_gpu))
    assert not links_cuda(shutil.which("ls") or "/bin/ls")
    assert not links_cuda("/nonexistent/osu_bw")
