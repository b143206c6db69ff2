"""STREAM's array size in the Spack environments follows the rule ``stream_check`` judges
by (:mod:`hpcval.spack.streamsize`): checked per environment against its site's node."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from hpcval.node import sizing
from hpcval.node.topology import Topology
from hpcval.spack import environment_names, read_lock, streamsize

ROOT = Path(__file__).resolve().parents[2]
MIB = 1 << 20


def _copy(name: str, tmp_path: Path) -> Path:
    envs = tmp_path / "environments"
    shutil.copytree(ROOT / "environments" / "common", envs / "common")
    shutil.copytree(ROOT / "environments" / name, envs / name,
                    ignore=shutil.ignore_patterns(".spack-env", "spack.lock",
                                                  streamsize.STREAM_INCLUDE))
    return envs / name


def test_the_size_is_the_one_stream_check_asks_for() -> None:
    """The issue's node: a 480 MiB last-level cache; stream_check's sanity asks for
    stream_array_size=251658240 there (4 x 480 MiB / 8 bytes)."""
    node = Topology(num_cpus=2, num_cores=2, num_sockets=1, llc_bytes=480 * MIB,
                    source="stated", llc_total_bytes=480 * MIB)
    assert streamsize.required_elements(node, 24 << 30) == 251658240
    with pytest.raises(sizing.SizingError):  # three 1.9 GiB arrays in 4 GiB of memory
        streamsize.required_elements(node, 4 << 30)


@pytest.mark.parametrize("name", environment_names(ROOT))
def test_every_environments_stream_is_sized_for_its_sites_node(name: str,
                                                               tmp_path: Path) -> None:
    """local and lab run on this host (their site configs describe it): the include
    `hpcval spack lock` writes holds this host's size, wins over the version pin, and
    STREAM's arrays are then >= 4x this host's last-level cache. Any other environment
    is reported unsized until it states its node's size (docs/spack.md)."""
    env_dir = _copy(name, tmp_path)
    if name not in streamsize.HOST_ENVIRONMENTS:
        problems = streamsize.stream_size_problems(env_dir, None)
        assert problems and "STREAM unsized" in problems[0]
        return
    includes = yaml.safe_load((env_dir / "spack.yaml").read_text())["spack"]["include"]
    # the first include has the highest precedence: the size wins over pins.yaml's
    assert includes.index(streamsize.STREAM_INCLUDE) < includes.index("../common/pins.yaml")
    assert streamsize.stream_size_problems(env_dir, None)[0].endswith(
        f"missing or without stream_array_size: run `hpcval spack lock --env {name}`")
    topo, mem = streamsize.host_node()
    if not (topo.llc_total_bytes or topo.llc_bytes):
        pytest.skip("this host's last-level cache is unknown")
    path, elements = streamsize.write_stream_size(env_dir, topo, mem, name)
    assert streamsize.pinned_elements(env_dir) == elements
    assert 8 * elements >= sizing.CACHE_FACTOR * (topo.llc_total_bytes or topo.llc_bytes or 0)
    assert (8 * elements) % MIB == 0
    require = yaml.safe_load(path.read_text())["packages"]["stream"]["require"]
    assert require == f"@5.10 stream_array_size={elements}"  # the pin, repeated
    assert streamsize.stream_size_problems(env_dir, None) == []
    # a lock concretized before the size changed is named
    stale = {"concrete_specs": {"s": {"name": "stream",
                                      "parameters": {"stream_array_size": "none"}}}}
    assert streamsize.stream_size_problems(env_dir, stale) == [
        f"{env_dir / 'spack.lock'}: stream stream_array_size=none, {path.name} pins "
        f"{elements}: run `hpcval spack lock --env {name}`"]
    # the lock this checkout made, where it made one
    lock_path = ROOT / "environments" / name / "spack.lock"
    if lock_path.is_file():
        assert streamsize.lock_elements(read_lock(lock_path.parent)) == [str(elements)]
