"""Bounded YAML loading: the ground floor every reader of a site's YAML files
stands on (references, host expectations, judging settings).

Safe and bounded in time and memory: at most :data:`MAX_YAML_BYTES` (refused
by size before a byte is parsed), UTF-8 only, at most :data:`MAX_YAML_NODES`
values as written (counted while the file is composed, so a file of 100,000
keys stops at the bound instead of being built whole first), a bounded number
of aliases and of values once aliases are expanded ("billion laughs"), no key
given twice in one mapping. This module imports nothing of hpcval; errors are
built by the caller's ``error(path, where, reason)``.

Measured (a 26 MB references file of 40,000 comment lines and 100,000 keys):
refused by size in well under a second; before these bounds it was composed
whole, minutes and gigabytes, and refused for aliases it does not have.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

#: Most YAML nodes a file may expand to, aliases followed: a few kilobytes
#: of nested aliases ("billion laughs") would otherwise expand to billions.
MAX_YAML_NODES = 100_000
#: Most aliases (``*name``) a file may use.
MAX_YAML_ALIASES = 1_000
#: Most bytes a file may have: a site's YAML files are a few kilobytes (the
#: shipped references 8 KB); 4 MiB is hundreds of times that, and PyPI's
#: pure-Python YAML reads it in a second or two.
MAX_YAML_BYTES = 4 << 20


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, counting aliases and values as it composes."""

    aliases = 0
    nodes = 0

    def compose_node(self, parent: Any, index: Any) -> Any:  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_YAML_ALIASES:
                raise _TooLarge(f"more than {MAX_YAML_ALIASES} aliases (*name); write the "
                                "values out")
        else:
            self.nodes += 1
            if self.nodes > MAX_YAML_NODES:
                raise _TooLarge(f"more than {MAX_YAML_NODES} values (keys, items and "
                                "scalars) as written: a site's file has hundreds; is it "
                                "the right file?")
        return super().compose_node(parent, index)


class _TooLarge(Exception):
    pass


def _count_before_composing(text: str) -> None:
    """Values and aliases of *text* counted from the parser's events, before
    anything is composed (libyaml's parser where PyYAML has it: 200,000
    events in a fraction of a second): a file over a bound is refused for
    the bound it is over. A syntax error stops the count; the composer then
    names it."""
    loader = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
    parser = loader(text)
    nodes = aliases = 0
    try:
        while (event := parser.get_event()) is not None:
            if isinstance(event, yaml.AliasEvent):
                aliases += 1
                if aliases > MAX_YAML_ALIASES:
                    raise _TooLarge(f"more than {MAX_YAML_ALIASES} aliases (*name); write the "
                                    "values out")
            elif isinstance(event, yaml.NodeEvent):
                nodes += 1
                if nodes > MAX_YAML_NODES:
                    raise _TooLarge(f"more than {MAX_YAML_NODES} values (keys, items and "
                                    "scalars) as written: a site's file has hundreds; is it "
                                    "the right file?")
    except yaml.YAMLError:
        return
    finally:
        parser.dispose()


def _expanded_size(node: yaml.Node, memo: dict[int, int], depth: int = 0) -> int:
    """Nodes ``node`` stands for once every alias is followed (each shared
    node counted once per use, computed once)."""
    if id(node) in memo:
        return memo[id(node)]
    if depth > 200:
        raise _TooLarge("nested more than 200 levels deep; write the values out")
    size = 1
    if isinstance(node, yaml.SequenceNode):
        size += sum(_expanded_size(n, memo, depth + 1) for n in node.value)
    elif isinstance(node, yaml.MappingNode):
        size += sum(_expanded_size(k, memo, depth + 1) + _expanded_size(v, memo, depth + 1)
                    for k, v in node.value)
    memo[id(node)] = size
    if size > MAX_YAML_NODES:
        raise _TooLarge(f"expands to more than {MAX_YAML_NODES} values once its aliases are "
                        "followed; write the values out")
    return size


def _duplicate_key(node: yaml.Node, seen: set[int]) -> tuple[str, int, int] | None:
    """The first key given twice in one mapping (key, first line, second line):
    YAML loaders keep the last one silently, hiding the first."""
    stack = [node]
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, yaml.MappingNode):
            lines: dict[str, int] = {}
            for key, value in current.value:
                if isinstance(key, yaml.ScalarNode) and key.value != "<<":
                    if key.value in lines:
                        return key.value, lines[key.value], key.start_mark.line + 1
                    lines[key.value] = key.start_mark.line + 1
                stack.append(value)
        elif isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)
    return None


def _size(nbytes: int) -> str:
    return f"{nbytes / (1 << 20):.1f} MiB" if nbytes >= 1 << 20 else f"{nbytes} bytes"


def _too_big(nbytes: int) -> str:
    return (f"{_size(nbytes)}: larger than the {_size(MAX_YAML_BYTES)} a site's YAML file may "
            "have (they are kilobytes): is it the right file?")


def read_bounded(path: str | Path, error: Callable[[str, str, str], Exception]) -> bytes:
    """The bytes of *path*; a file larger than :data:`MAX_YAML_BYTES` is
    refused by its size (``error(path, "", reason)``) without being read.
    :class:`OSError` as ``open`` raises it."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > MAX_YAML_BYTES:
            raise error(str(path), "", _too_big(size))
        data = fh.read(MAX_YAML_BYTES + 1)  # a file that grew (or a pipe): the check below
    if len(data) > MAX_YAML_BYTES:
        raise error(str(path), "", _too_big(len(data)))
    return data


def load_yaml_bounded(data: bytes, path: str,
                      error: Callable[[str, str, str], Exception]) -> Any:
    """YAML from ``data`` (the bytes of file ``path``), safely and in bounded
    time and memory: UTF-8 only (a bad byte is named with its offset), at most
    :data:`MAX_YAML_ALIASES` aliases and :data:`MAX_YAML_NODES` values once
    aliases are expanded, no key given twice in one mapping. Errors are
    ``error(path, where, reason)``."""
    if len(data) > MAX_YAML_BYTES:
        raise error(path, "", _too_big(len(data)))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise error(path, f"byte offset {err.start} (line {line})",
                    f"not UTF-8 (byte 0x{data[err.start]:02x}): save the file as UTF-8") \
            from None
    loader = _BoundedLoader(text)
    try:
        _count_before_composing(text)
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, {})
        twice = _duplicate_key(node, set())
        if twice is not None:
            key, first, second = twice
            raise error(path, f"line {second}",
                        f"'{key}' given twice (lines {first} and {second}): keep one")
        return loader.construct_document(node)
    except _TooLarge as err:
        raise error(path, "", f"YAML too large: {err}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else ""
        raise error(path, where, f"not valid YAML: {getattr(err, 'problem', None) or err}") \
            from None
    except RecursionError:
        raise error(path, "", "YAML nested too deeply") from None
    finally:
        loader.dispose()
