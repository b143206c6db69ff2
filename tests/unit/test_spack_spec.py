"""describe_spec on the spec.json Spack wrote for a real install of IMB built against Open MPI."""

from pathlib import Path

from hpcval import spack

DATA = Path(__file__).resolve().parents[1] / "data" / "spack" / "imb-openmpi"


def test_describe_spec_names_root_compiler_and_mpi() -> None:
    nodes = spack.read_spec_json(DATA)
    text = spack.describe_spec(nodes, "mpi")
    assert text.startswith("intel-mpi-benchmarks@2021.7")
    assert "%gcc@12.2.0" in text
    assert "^openmpi@4.1.4" in text
    assert "+mpi1" in text
    # boolean variants come before key=value ones, as in Spack's own spec syntax
    mpi = text.split(" ^")[1]
    assert mpi.index(" fabrics=ucx") > mpi.rfind("+wrapper-rpath")


def test_describe_spec_without_dependency_has_no_caret() -> None:
    text = spack.describe_spec(spack.read_spec_json(DATA))
    assert "^" not in text


def test_mpi_node_is_the_provider_of_mpi() -> None:
    node = spack.mpi_node(spack.read_spec_json(DATA))
    assert node is not None
    assert (node["name"], node["version"]) == ("openmpi", "4.1.4")
