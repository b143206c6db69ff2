"""hpcval.spack is a package of rooms by concern; its public names are still read as
``hpcval.spack.<name>``, and what site configs need imports no other room."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from hpcval import spack


def _defined(room: str) -> set[str]:
    """Public names a room defines (not those it imports from elsewhere)."""
    module = importlib.import_module(f"hpcval.spack.{room}")
    source = module.__loader__.get_source(module.__name__) or ""  # type: ignore[union-attr]
    return {name for name in vars(module) if not name.startswith("_")
            and (f"\ndef {name}(" in source or f"\n{name} =" in source
                 or f"\n{name}: " in source)}


def test_every_public_name_of_a_room_is_read_from_the_package() -> None:
    seen: dict[str, str] = {}
    for room in spack.ROOMS:
        for name in _defined(room):
            assert name not in seen, f"{name} in {seen.get(name)} and {room}"
            seen[name] = room
            assert getattr(spack, name) is getattr(
                importlib.import_module(f"hpcval.spack.{room}"), name)
    assert {"find_spack", "describe_spec", "doctor", "lock_environment",
            "write_venv_externals", "proxy_version_problem"} <= set(seen)
    assert set(seen) <= set(dir(spack))
    with pytest.raises(AttributeError):
        spack.no_such_name  # noqa: B018


def test_what_site_configs_need_imports_no_other_room() -> None:
    code = ("import sys; from hpcval import spack; spack.find_spack(); spack.describe_spec; "
            "spack.BENCHMARK_PACKAGES; print(sorted(m for m in sys.modules "
            "if m.startswith('hpcval.spack.') or m == 'yaml'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "['hpcval.spack.builds']"
