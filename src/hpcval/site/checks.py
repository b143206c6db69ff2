"""Check discovery: the one place that finds the check classes of a checkout.

Two ways, for two needs:

* **Reading** (:func:`class_names`, :func:`class_attributes`,
  :func:`assignments`): the Python files below a directory are parsed with
  :mod:`ast`, nothing is imported, so a broken check cannot stop a references
  file from being validated.
* **Importing** (:func:`import_classes`, :func:`subclasses`): the classes
  themselves, where their declarations (``figures``) are needed; a file that
  does not import is left to the run, which reports it.
"""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from typing import Any


def check_files(*directories: str | Path) -> list[Path]:
    """The Python files below ``directories``, in a stable order."""
    return [f for d in directories for f in sorted(Path(d).rglob("*.py"))]


def _class_defs(file: Path) -> list[ast.ClassDef]:
    try:
        tree = ast.parse(file.read_text(), filename=str(file))
    except (SyntaxError, OSError, UnicodeDecodeError, ValueError):
        return []
    return [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]


def class_names(*directories: str | Path) -> set[str]:
    """Names of the classes defined in the check files below ``directories``
    (read with :mod:`ast`, nothing is imported)."""
    return {cls.name for file in check_files(*directories) for cls in _class_defs(file)}


def class_areas(directory: str | Path) -> dict[str, str]:
    """Each class of ``<directory>/<area>/*.py`` with its area (the folder),
    read with :mod:`ast`."""
    areas: dict[str, str] = {}
    for file in sorted(Path(directory).glob("*/*.py")):
        for cls in _class_defs(file):
            areas.setdefault(cls.name, file.parent.name)
    return areas


def class_attributes(*directories: str | Path) -> dict[str, tuple[list[str], set[str]]]:
    """For every class defined in the Python files below ``directories``
    (read with :mod:`ast`, nothing imported): its base class names and the
    attributes it defines (class-level names, ``self.x = ...`` anywhere)."""
    classes: dict[str, tuple[list[str], set[str]]] = {}
    for file in check_files(*directories):
        for cls in _class_defs(file):
            bases = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")
                     for b in cls.bases]
            names: set[str] = set()
            for node in ast.walk(cls):
                targets: list[Any] = []
                if isinstance(node, ast.Assign):
                    targets = node.targets
                elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                    targets = [node.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        names.add(t.id)
                    elif (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                          and t.value.id == "self"):
                        names.add(t.attr)
            classes.setdefault(cls.name, (bases, set()))[1].update(names)
            classes[cls.name][0].extend(b for b in bases if b not in classes[cls.name][0])
    return classes


def assignments(*directories: str | Path) -> list[tuple[Path, int, str]]:
    """Every name assigned in the Python files below ``directories`` (read
    with :mod:`ast`), as (file, line, name): ``x = ...`` (also ``+=``,
    annotated, tuple targets), ``obj.x = ...`` at any depth (``self.job.x``)
    and ``setattr(obj, "x", ...)``."""
    found: list[tuple[Path, int, str]] = []
    for file in check_files(*directories):
        try:
            tree = ast.parse(file.read_text(), filename=str(file))
        except (SyntaxError, OSError, UnicodeDecodeError, ValueError):
            continue
        for node in ast.walk(tree):
            targets: list[Any] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                targets = [node.target]
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                  and node.func.id == "setattr" and len(node.args) >= 2
                  and isinstance(node.args[1], ast.Constant)
                  and isinstance(node.args[1].value, str)):
                found.append((file, node.lineno, node.args[1].value))
            while targets:
                t = targets.pop()
                if isinstance(t, (ast.Tuple, ast.List)):
                    targets.extend(t.elts)
                elif isinstance(t, ast.Starred):
                    targets.append(t.value)
                elif isinstance(t, ast.Name):
                    found.append((file, t.lineno, t.id))
                elif isinstance(t, ast.Attribute):
                    found.append((file, t.lineno, t.attr))
    return found


def import_classes(directory: str | Path) -> dict[str, type]:
    """The public classes of the check files below ``directory`` (theirs and
    those they import), each file imported as its own module; a file that
    does not import is left out (the run reports it)."""
    found: dict[str, type] = {}
    for n, file in enumerate(check_files(directory)):
        name = f"_hpcval_check_{n}_{file.stem}"
        try:
            spec = importlib.util.spec_from_file_location(name, file)
            if spec is None or spec.loader is None:
                continue
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        except Exception:  # noqa: BLE001 - a check that does not import fails in the run
            sys.modules.pop(name, None)
            continue
        for cls_name, cls in vars(module).items():
            if isinstance(cls, type) and not cls_name.startswith("_"):
                found[cls_name] = cls
    return found


def subclasses(base: type) -> list[type]:
    """Every class derived from ``base`` that is loaded, each once."""
    found: list[type] = []
    stack = list(base.__subclasses__())
    while stack:
        cls = stack.pop()
        if cls not in found:
            found.append(cls)
            stack.extend(cls.__subclasses__())
    return found
