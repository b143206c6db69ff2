"""A site's vetting rules file (``site-configs/<site>/vet-rules.yaml``) that is
not of its shape: `hpcval vet` says one line naming the file and the key
(exit 2) before it allocates anything, leaves no results directory, and never
shows a traceback. Slurm's client commands are the scripts of
test_vet_faults.py (an 8-node cluster whose MaxStepCount of 5 refuses every
plan: a good rules file gets as far as that refusal)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .conftest import ROOT, assert_clean_failure, run
from .test_vet_faults import fake_slurm as fake_slurm  # noqa: F401 (a fixture)


@pytest.fixture
def lab_root(tmp_path: Path) -> Path:
    root = tmp_path / "hpcval"
    (root / "site-configs").mkdir(parents=True)
    shutil.copytree(ROOT / "site-configs" / "lab", root / "site-configs" / "lab")
    for name in ("reframe-checks", "proxies"):
        (root / name).symlink_to(ROOT / name)
    return root


BAD = [
    ("codes:\n  HC-NOPE: {severity: off}\n", "codes.HC-NOPE", "not a finding code"),
    ("codes:\n  HC-IB-SYMBOL: {severity: drain}\n", "codes.HC-IB-SYMBOL.severity",
     "'drain' is not one of"),
    ("codes:\n  HC-ECC-CE: {threshold: -1}\n", "codes.HC-ECC-CE.threshold", "not a number"),
    ("codes:\n  HC-TRIAD: {threshold: 3}\n", "codes.HC-TRIAD.threshold",
     "only error-counter codes"),
    ("allow:\n  gpu: {model: [A100]}\n", "allow.gpu", "not a category"),
    ("allow:\n  cpu: {model: Intel}\n", "allow.cpu.model", "non-empty list"),
    ("rules: []\n", "rules", "unknown section"),
    ("codes: [\n", "line", "not valid YAML"),
]


@pytest.mark.parametrize("text,key,what", BAD, ids=[b[1] for b in BAD])
def test_a_bad_rules_file_is_named_with_its_key(lab_root: Path, fake_slurm: dict[str, str],  # noqa: F811
                                                text: str, key: str, what: str) -> None:
    path = lab_root / "site-configs" / "lab" / "vet-rules.yaml"
    path.write_text(text)
    res = run(lab_root, "vet", "--site", "lab", "--quiet", env=fake_slurm)
    assert_clean_failure(res, 2, "vet-rules.yaml", key, what)
    vet_dir = Path(fake_slurm["HPCVAL_VAR"]) / "lab" / "vet"
    assert not vet_dir.exists() or [p.name for p in vet_dir.iterdir()] == []


def test_a_good_rules_file_is_taken(lab_root: Path, fake_slurm: dict[str, str]) -> None:  # noqa: F811
    (lab_root / "site-configs" / "lab" / "vet-rules.yaml").write_text(
        "codes:\n  HC-IB-SYMBOL: {severity: off, threshold: 100}\n"
        "  HC-UNI-SOFTWARE: {severity: ignore}\n"
        "allow:\n  cpu:\n    model: [A, B]\nignore_keys:\n  kernel: [cmdline]\n")
    res = run(lab_root, "vet", "--site", "lab", "--quiet", env=fake_slurm)
    assert_clean_failure(res, 2, "MaxStepCount is 5")  # past the rules, refused by the plan
