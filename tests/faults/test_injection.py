"""Nothing from a config is executed: values with ``$(...)``, ``;``,
backticks, quotes and spaces in every config value that reaches a job
script (environment ``env_vars``, ``extras.mpirun``, partition ``env_vars``)
stay literal through real ReFrame job scripts; no file is created."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import (
    CHECKS,
    TRACEBACK,
    assert_clean_failure,
    make_checkout,
    needs_impi,
    report_cases,
    run,
)

pytestmark = pytest.mark.integration

def hostile(where: Path) -> dict[str, str]:
    """name -> value: each would create a file INJ_<x> in *where* (an absolute
    path: ReFrame runs what it expands in the stage directory, which it
    removes after a passing test) if a shell or ReFrame ran it."""
    return {
        "PROBE_SUBST": f"$(touch {where}/INJ_SUBST)",
        "PROBE_SEMI": f"x;touch {where}/INJ_SEMI",
        "PROBE_TICK": f"`touch {where}/INJ_TICK`",
        "PROBE_SPACE": "two words  and more",
        "PROBE_QUOTE": f"it's \"quoted\" & |piped| > {where}/INJ_REDIRECT",
        "PROBE_NEWREF": "$HPCVAL_PROBE_UNSET/x y",
    }


def _patch_config(root: Path, code: str) -> None:
    config = root / "site-configs" / "local" / "config.py"
    text = config.read_text()
    marker = "site_configuration = {"
    config.write_text(text.replace(marker, code + "\n\n" + marker, 1))


def _no_injected_files(root: Path) -> None:
    found = [str(p) for p in root.rglob("INJ_*")] + [str(p) for p in Path.cwd().glob("INJ_*")]
    assert not found, f"a config value was executed: {found}"


@pytest.mark.parametrize("select", ["fake_imb_check.*mode=ok-env$", "fake_built_check"])
def test_environment_values_stay_literal(tmp_path: Path, select: str) -> None:
    """Run alone and with a build step (ReFrame loads the environments for
    both jobs)."""
    needs_impi()
    root = make_checkout(tmp_path)
    inj = tmp_path / "inj"
    inj.mkdir()
    values = hostile(inj)
    # an mpirun in a directory whose name is a shell command
    hostile_dir = tmp_path / "bin $(touch INJ_DIR);`touch INJ_DIRTICK`"
    hostile_dir.mkdir()
    from hpcval.rfm.site import intel_mpi_from_pypi

    real = intel_mpi_from_pypi()["extras"]["mpirun"]  # type: ignore[index]
    wrapper = hostile_dir / "mpirun"
    wrapper.write_text(f"#!/bin/sh\nexec '{real}' \"$@\"\n")
    wrapper.chmod(0o755)
    _patch_config(root, f"""
for _env in ENVIRONMENTS:
    if _env["name"] == "impi":
        _env["env_vars"] = _env["env_vars"] + {[[k, v] for k, v in values.items()]!r}
        _env["extras"] = {{**_env["extras"], "mpirun": {str(wrapper)!r}}}
""")
    res = run(root, "validate", "--site", "local", "--", "-c", str(CHECKS), "-n", select)
    assert res.returncode == 0, res.output
    assert TRACEBACK not in res.output
    _no_injected_files(root)
    _no_injected_files(tmp_path)
    report = sorted((root / "var" / "local" / "reports").glob("run-report-*.json"))[-1]
    (tc,) = report_cases(report).values()
    out = Path(tc["outputdir"])
    seen = dict(line[len("# env: "):].split("=", 1)
                for line in (out / "rfm_job.out").read_text().splitlines()
                if line.startswith("# env: "))
    expected = {**values, "PROBE_NEWREF": "/x y"}  # $NAME references stay expansions
    assert seen == expected
    assert f"'{wrapper}'" in (out / "rfm_job.sh").read_text()  # quoted, not as-is


@pytest.mark.parametrize("select", ["fake_imb_check.*mode=ok$", "fake_built_check"])
def test_partition_env_vars_with_shell_rejected(tmp_path: Path, select: str) -> None:
    """Rejected before ReFrame loads the partition's environment, for the
    build job as for the run."""
    needs_impi()
    root = make_checkout(tmp_path)
    config = root / "site-configs" / "local" / "config.py"
    text = config.read_text()
    config.write_text(text.replace('"max_jobs":', '"env_vars": [["PROBE_PART", '
                                   f'"$(touch {tmp_path}/INJ_PART)"]],\n'
                                   '                    "max_jobs":', 1))
    res = run(root, "validate", "--site", "local", "--", "-c", str(CHECKS), "-n", select)
    assert_clean_failure(res, 2, "partition local:default env_vars PROBE_PART",
                         "holds shell characters")
    _no_injected_files(tmp_path)
