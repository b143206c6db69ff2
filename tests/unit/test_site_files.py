"""A site's files: named by Site, loaded by Site, checked before a run."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from hpcval import site as site_module
from hpcval.core.errors import HpcvalError, InputError, SiteError
from hpcval.history.judging.settings import JudgingSettings
from hpcval.site import Site

ROOT = Path(__file__).resolve().parents[2]


def _site(tmp_path: Path, name: str = "s") -> Site:
    (tmp_path / "reframe-checks").mkdir(exist_ok=True)
    (tmp_path / "site-configs" / name).mkdir(parents=True)
    (tmp_path / "site-configs" / name / "config.py").write_text("")
    return Site.load(name, tmp_path)


def test_every_site_file_is_a_site_property(tmp_path):
    site = _site(tmp_path)
    assert {p.name for p in (site.config, site.references, site.host_expectations,
                             site.judging, site.tuning)} == {
        site_module.CONFIG_FILE, site_module.REFERENCES_FILE,
        site_module.HOST_EXPECTATIONS_FILE, site_module.JUDGING_FILE, site_module.TUNING_FILE}
    assert all(p.parent == site.dir for p in (site.references, site.tuning, site.judging))


def test_the_results_store_is_laid_out_by_the_site(tmp_path, monkeypatch):
    """The run's stage directory the stopper cleans is the one ReFrame was
    given, and `validate` and `store rebuild` take the same lock."""
    from hpcval.core.runid import ENV
    from hpcval.rfm.site import common_sections, run_directories

    monkeypatch.setenv("HPCVAL_VAR", str(tmp_path / "var"))
    monkeypatch.setenv(ENV, "20261126T000000Z-abcdef")
    monkeypatch.setattr("hpcval.core.runid._current", None)
    site = _site(tmp_path)
    dirs = run_directories(site.dir)
    assert dirs["stagedir"] == str(site.stage_dir("20261126T000000Z-abcdef"))
    assert dirs["outputdir"] == str(site.output_dir("20261126T000000Z-abcdef"))
    general = common_sections(site.dir)["general"][0]
    assert general["topology_prefix"] == str(site.topology_dir) and site.topology_dir.is_dir()
    assert general["check_search_path"] == [str(site.checks_dir)]
    assert site.lock_file.parent == site.var == tmp_path / "var" / "s"
    assert site.run_log("r1") == site.var / "logs" / "r1.out"
    sources = "".join((ROOT / "src/hpcval" / f).read_text()
                      for f in ("run/runner.py", "run/storecheck.py", "run/earlier.py",
                                "commands/store.py", "rfm/site.py"))
    assert '"validate.lock"' not in sources and '"stage"' not in sources


def test_a_site_without_optional_files(tmp_path):
    site = _site(tmp_path)
    assert site.load_host_expectations() is None
    assert site.load_tuning() is None
    assert site.load_judging() == JudgingSettings()


def test_the_loaders_validate(tmp_path):
    site = _site(tmp_path)
    site.tuning.write_text("Allreduce: {setting: '12:0-8;3:9-100', ranks: 2, nodes: 1}\n")
    site.judging.write_text("k: 7\n")
    site.host_expectations.write_text("smt_control: 'off'\n")
    assert site.load_tuning()["Allreduce"]["ranks"] == 2
    assert site.load_judging().k == 7
    assert site.load_host_expectations() == {"smt_control": "off"}
    site.tuning.write_text("Allreduce: {setting: fast}\n")
    with pytest.raises(SiteError, match=r"mpi-tuning.yaml: Allreduce.setting"):
        site.load_tuning()
    site.judging.write_text("kk: 7\n")
    with pytest.raises(InputError, match=r"judging.yaml: kk: unknown setting"):
        site.load_judging()


def test_the_local_site_loads():
    site = Site.load("local", ROOT)
    assert site.load_references().entries
    assert site.check_references().path == site.references


def _fake_test(extras: dict) -> SimpleNamespace:
    return SimpleNamespace(current_partition=SimpleNamespace(extras=extras, fullname="sys:part"))


def test_a_check_reaches_its_site_through_the_site_directory_only():
    from hpcval.rfm.site import partition_extras

    local = Site.load("local", ROOT)
    extras = partition_extras(local.dir, budget="quick")
    assert extras == {"site_dir": str(local.dir), "budget": "quick"}
    found = Site.of_test(_fake_test(extras))
    assert found == local and found.references == local.references
    # a references file named in extras is no second route to the site
    with pytest.raises(SiteError, match=r"'sys:part' has no extras.site_dir.*partition_extras"):
        Site.of_test(_fake_test({"references": str(local.references)}))


def test_the_references_variable_is_gone():
    from hpcval.rfm.base import HpcvalTest

    assert "references_file" not in HpcvalTest._rfm_var_space


SITE_CONFIG = '''
from pathlib import Path

from hpcval.rfm.site import common_sections, partition_extras, run_directories

SITE_DIR = Path(__file__).resolve().parent
site_configuration = {
    "systems": [{
        "name": "t", "hostnames": [".*"], **run_directories(SITE_DIR),
        "partitions": [{"name": "p", "scheduler": "local", "launcher": "local",
                        "environs": ["builtin"],
                        "extras": partition_extras(SITE_DIR, provenance={"fabric": "1g"})}],
    }],
    **common_sections(SITE_DIR),
}
'''


def test_the_site_config_loads_as_reframe_loads_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HPCVAL_VAR", str(tmp_path / "var"))
    site = _site(tmp_path, "declares")
    site.config.write_text(SITE_CONFIG)
    (part,) = site.reframe_config()["systems"][0]["partitions"]
    assert part["extras"]["provenance"] == {"fabric": "1g"}
    broken = _site(tmp_path, "broken")
    broken.config.write_text("site_configuration = {'systems': 1}\n")
    with pytest.raises(SiteError, match=r"broken/config.py: the site config fails to load"):
        broken.reframe_config()


def test_provenance_is_what_the_site_config_declares(tmp_path):
    """Each check records its partition's extras.provenance; the stored run
    keeps it beside the host's kernel and machine."""
    import json

    from hpcval.history.runreport import load_run_report
    from hpcval.rfm.base import HpcvalTest
    from hpcval.run.verdicts import provenance

    fake = SimpleNamespace(
        current_environ=SimpleNamespace(extras={"mpi_stack": "impi"}),
        current_partition=SimpleNamespace(extras={"provenance": {"fabric": "1g"}}),
        spack_package=None)
    HpcvalTest._hpcval_record_stack(fake)
    assert fake.site_provenance == {"fabric": "1g"} and fake.mpi_stack == "impi"

    data = json.loads((ROOT / "tests/data/compare/lab-1g-run-report.json").read_text())
    path = tmp_path / "run-report.json"
    path.write_text(json.dumps(data))
    plain = provenance(load_run_report(path))
    assert set(plain) == {"kernel", "machine"}  # a site that declares nothing adds nothing
    for case in data["runs"][0]["testcases"]:
        case["site_provenance"] = fake.site_provenance
    path.write_text(json.dumps(data))
    assert provenance(load_run_report(path)) == {**plain, "fabric": "1g"}


def test_the_lab_declares_its_fabric():
    (part,) = Site.load("lab", ROOT).reframe_config()["systems"][0]["partitions"]
    # the profile and the delay on the links (lab fabric --delay); None while no lab is up
    assert {"fabric", "fabric_delay"} <= set(part["extras"]["provenance"])
    assert 'name == "lab"' not in (ROOT / "src/hpcval/run/verdicts.py").read_text()


BAD_TUNING = "Allreduce: {setting: '12:0-8;3:9-100', ranks: '2', nodes: 1}\n"


def _checkout(tmp_path: Path, monkeypatch) -> Site:
    """A checkout with the real checks and a copy of the local site."""
    import shutil

    shutil.copytree(ROOT / "site-configs" / "local", tmp_path / "site-configs" / "local")
    (tmp_path / "reframe-checks").symlink_to(ROOT / "reframe-checks")
    monkeypatch.setenv("HPCVAL_ROOT", str(tmp_path))
    monkeypatch.setenv("HPCVAL_VAR", str(tmp_path / "var"))
    return Site.load("local", tmp_path)


def test_one_check_covers_every_site_file(tmp_path, monkeypatch):
    site = _checkout(tmp_path, monkeypatch)
    site.judging.write_text("k: 7\n")
    site.tuning.write_text("Allreduce: {setting: '12:0-8;3:9-100', ranks: 2, nodes: 1}\n")
    checked = site.check_files()
    assert list(checked) == [site.references, site.host_expectations, site.judging, site.tuning]
    assert checked[site.judging].k == 7 and checked[site.tuning]["Allreduce"]["ranks"] == 2
    site.tuning.write_text(BAD_TUNING)
    with pytest.raises(SiteError, match=r"mpi-tuning.yaml: Allreduce.ranks: '2' is not a "
                                        r"positive whole number; write the file again with "
                                        r"`hpcval tune collectives --write`"):
        site.check_files()


def test_validate_stops_on_a_malformed_tuning_file_before_any_check_runs(
        tmp_path, monkeypatch, capsys):
    from hpcval.cli import main
    from hpcval.run import runner

    site = _checkout(tmp_path, monkeypatch)
    site.tuning.write_text(BAD_TUNING)

    def no_run(*args, **kwargs):
        raise AssertionError("ReFrame started")

    monkeypatch.setattr(runner, "run_reframe", no_run)
    assert main(["validate", "--site", "local"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"hpcval: error: {site.tuning}: Allreduce.ranks: '2' is not a positive "
                   "whole number; write the file again with `hpcval tune collectives "
                   "--write`, or delete the entry (the tuned check then skips that "
                   "collective)"]
    assert not (site.var / "reports").exists() or not any((site.var / "reports").iterdir())
    # `references check` says the same; a good file gets its OK line
    assert main(["references", "check", "--site", "local"]) == 2
    assert "Allreduce.ranks" in capsys.readouterr().err
    site.tuning.write_text(BAD_TUNING.replace("'2'", "2"))
    assert main(["references", "check", "--site", "local"]) == 0
    assert f"{site.tuning}: OK" in capsys.readouterr().out.splitlines()


def test_an_edited_tuning_or_judging_file_is_checked_again(tmp_path, monkeypatch):
    from hpcval.run import runner

    site = _checkout(tmp_path, monkeypatch)
    stamp = runner._site_files_stamp(site)
    for path, text in ((site.tuning, BAD_TUNING), (site.judging, "k: 3\n")):
        path.write_text(text)
        assert runner._site_files_stamp(site) != stamp
        stamp = runner._site_files_stamp(site)


# -- vetting reads the site as ReFrame and a run do --------------------------

def _vet_site(directory: Path, system: str, partition: str, environ: str = "impi"):
    from hpcval.vet.sitecfg import VetSite

    return VetSite(name=directory.name, dir=directory, var=directory / "var", system=system,
                   partition=partition, slurm_partition=partition, env_name=environ)


def test_vetting_bounds_are_the_checks_references_resolved():
    bounds = _vet_site(ROOT / "site-configs" / "lab", "lab", "lab").references()
    assert {fig: round(b, 6) for fig, (b, _) in bounds.items()} == {
        "pingpong_bw_1MiB": 170.4, "shm_pingpong_bw_1MiB": 200.0, "triad_bw": 1000.0}
    assert bounds["pingpong_bw_1MiB"][1] == "references.yaml: imb_pingpong_internode_check bw_1MiB"


def test_vetting_resolves_indexed_references_per_environment(tmp_path):
    site = _site(tmp_path, "indexed")
    site.references.write_text(
        "imb_pingpong_check:\n"
        "  $index: [$environ, cache]\n"
        "  impi: {warm: {bw_1MiB: [300.0, -0.5, null, MB/s]}}\n"
        "  'open.*': {warm: {bw_1MiB: [100.0, -0.5, null, MB/s]}}\n"
        "cfdio_triad_check:\n"
        "  $index: [ranks]\n"
        "  2: {triad_bw: [5000.0, -0.8, null, MB/s]}\n")
    assert _vet_site(site.dir, "c", "p").references() == {
        "shm_pingpong_bw_1MiB": (150.0, "references.yaml: imb_pingpong_check bw_1MiB")}
    assert _vet_site(site.dir, "c", "p", "openmpi").references()[
        "shm_pingpong_bw_1MiB"][0] == 50.0
    # an environment with no reference, a parameter vetting does not know: no bound
    assert _vet_site(site.dir, "c", "p", "mpich").references() == {}


def test_vetting_sizes_the_triad_beyond_the_nodes_caches(tmp_path, monkeypatch):
    """The per-node triad is sized from the partition's processor as the site config
    states it (here the 16-core Xeon with 300 MiB of L3): the old fixed 96 MB
    (4,000,000 doubles a array) would have sat in that L3 and compared caches."""
    from hpcval.vet import measure, sitecfg

    monkeypatch.setenv("HPCVAL_ROOT", str(tmp_path))
    monkeypatch.setenv("HPCVAL_VAR", str(tmp_path / "var"))
    processor = json.loads((ROOT / "tests" / "data" / "topology"
                            / "vm-16core-xeon-300mib-l3.json").read_text())
    site = _site(tmp_path, "big")
    site.config.write_text(SITE_CONFIG.replace(
        '"scheduler": "local", "launcher": "local"',
        f'"scheduler": "squeue", "launcher": "srun", "processor": {processor!r}').replace(
        'provenance={"fabric": "1g"}', 'provenance={"fabric": "1g"}, mem_per_node="125GiB"'))
    found = sitecfg.load("big", environ="builtin")
    assert found.node.llc_bytes == 300 * 2**20 and found.node.mem_bytes == 125 * 2**30
    size = measure.triad_size(found, measure.Settings())
    assert 8 * size.params["triad_n"] >= 4 * 300 * 2**20  # each array >= 4x the L3
    assert "300 MiB last-level cache" in size.reason
    assert measure.triad_size(found, measure.Settings(triad_n=1000)).params["triad_n"] == 1000
    site.config.write_text(site.config.read_text().replace('"125GiB"', '"lots"'))
    with pytest.raises(HpcvalError, match=r"big/config.py: partition 'p' extras mem_per_node"):
        sitecfg.load("big", environ="builtin")


def test_vetting_loads_the_site_config_through_reframe(tmp_path, monkeypatch):
    from hpcval.vet import sitecfg

    monkeypatch.setenv("HPCVAL_ROOT", str(tmp_path))
    monkeypatch.setenv("HPCVAL_VAR", str(tmp_path / "var"))
    site = _site(tmp_path, "slurmy")
    site.config.write_text(SITE_CONFIG.replace('"scheduler": "local", "launcher": "local"',
                                               '"scheduler": "squeue", "launcher": "srun", '
                                               '"access": ["--partition=batch"]'))
    found = sitecfg.load("slurmy", environ="builtin")  # ReFrame's own builtin environment
    assert (found.system, found.partition, found.slurm_partition) == ("t", "p", "batch")
    # ReFrame's schema refuses what a plain import of config.py would let through
    site.config.write_text(SITE_CONFIG.replace('"environs"', '"environ"'))
    with pytest.raises(SiteError, match=r"slurmy/config.py: the site config fails to load"):
        sitecfg.load("slurmy", environ="builtin")
