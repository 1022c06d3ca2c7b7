"""How an inventory error reads: the file, the YAML path of the bad value
(``nodes[2].power.driver``), the value, what would have been valid and the line.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

import yaml
from pydantic import (
    BaseModel,
    ValidationError,
)

from harness.driver_registry import FieldError
from harness.errors import ConfigError
from harness.inventory.fields import is_secret_key, walk_data
from harness.inventory.models import Inventory

# -- error rendering -------------------------------------------------------------------------


def _yaml_path(loc: Sequence[str | int]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z0-9_\-]+", part):
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out


def line_of(tree: yaml.Node | None, loc: Sequence[str | int]) -> int:
    """1-based line of the deepest YAML node on ``loc`` (0 when unknown)."""
    node = tree
    line = node.start_mark.line + 1 if node is not None else 0
    for part in loc:
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.value == part:
                    child = value_node
                    line = key_node.start_mark.line + 1
                    break
        elif (
            isinstance(node, yaml.SequenceNode)
            and isinstance(part, int)
            and 0 <= part < len(node.value)
        ):
            child = node.value[part]
            line = child.start_mark.line + 1
        if child is None:
            break
        node = child
    return line


def _unwrap(annotation: object) -> list[object]:
    """The model classes an annotation can hold (through Optional, list, dict, Annotated)."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list, dict):
        out: list[object] = []
        for arg in typing.get_args(annotation):
            out.extend(_unwrap(arg))
        return out
    return [annotation]


def model_keys(model: type[BaseModel]) -> list[str]:
    """The YAML keys of ``model`` (aliases where a field has one)."""
    return [field.alias or name for name, field in model.model_fields.items()]


def _model_at(loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model class that validates the mapping at ``loc`` (None for a plain value)."""
    model: type[BaseModel] = Inventory
    for part in loc:
        if isinstance(part, int):
            continue
        fields = {f.alias or n: f for n, f in model.model_fields.items()}
        field = fields.get(part)
        if field is None:
            return None
        candidates = [
            c for c in _unwrap(field.annotation) if isinstance(c, type) and issubclass(c, BaseModel)
        ]
        if not candidates:
            return None
        model = candidates[0]
    return model


def _show(value: object) -> str:
    if isinstance(value, dict | list):
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."
    return repr(value)


def _valid_values(expected: str) -> str:
    """``"'a', 'b' or 'c'"`` (pydantic's literal_error ctx) -> ``"a, b, c"``."""
    values = re.findall(r"'([^']*)'", expected)
    return ", ".join(values) if values else expected


def _describe(error: Mapping[str, Any], data: object) -> tuple[tuple[str | int, ...], str]:
    loc: tuple[str | int, ...] = tuple(error["loc"])
    kind = error["type"]
    ctx = error.get("ctx") or {}
    secret = any(is_secret_key(p) for p in loc)
    found, value = walk_data(data, loc)
    shown = "the value" if secret else _show(value)
    exc = ctx.get("error")
    if isinstance(exc, FieldError):
        loc = loc + exc.subpath
        return loc, exc.message
    if kind == "extra_forbidden":
        parent = _model_at(loc[:-1])
        valid = model_keys(parent) if parent else []
        key = str(loc[-1])
        close = difflib.get_close_matches(key, valid, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return loc, f"unknown key {key!r}{hint}; valid keys: {', '.join(valid)}"
    if kind == "missing":
        return loc, "is required but missing"
    if kind in ("literal_error", "enum"):
        return (
            loc,
            f"{shown} is not valid; must be one of: {_valid_values(str(ctx.get('expected')))}",
        )
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        parent = _model_at(loc)
        keys = f" with keys: {', '.join(model_keys(parent))}" if parent else ""
        return loc, f"{shown} is not valid; expected a mapping{keys}"
    if kind == "list_type":
        return loc, f"{shown} is not valid; expected a list"
    if kind == "too_short" and ctx.get("min_length") == 1:
        return loc, "must not be empty"
    scalar = found and not secret and not isinstance(value, dict | list)
    if kind == "value_error" and isinstance(exc, ValueError):
        message = str(exc)
        return loc, f"{shown}: {message}" if scalar and repr(value) not in message else message
    message = str(error["msg"])
    message = message[0].lower() + message[1:]
    return loc, f"{shown} is not valid: {message}" if scalar else message


def config_error(
    exc: ValidationError, data: object, tree: yaml.Node | None, source: str
) -> ConfigError:
    errors = exc.errors(include_url=False, include_input=False)
    # A misspelt key shows up twice: as an unknown key and as a missing one. The unknown key
    # is the cause, so it goes first.
    errors.sort(key=lambda e: e["type"] != "extra_forbidden")
    described = [_describe(e, data) for e in errors]
    loc, message = described[0]
    where = []
    if len(loc) >= 2 and loc[0] == "nodes" and isinstance(loc[1], int):
        found, name = walk_data(data, ("nodes", loc[1], "name"))
        if found and isinstance(name, str):
            where.append(f"node {name!r}")
    line = line_of(tree, loc)
    if line:
        where.append(f"line {line}")
    text = f"{message} ({', '.join(where)})" if where else message
    others = [f"{_yaml_path(lo) or '(top level)'}: {m}" for lo, m in described[1:5]]
    if len(described) > 5:
        others.append(f"... and {len(described) - 5} more")
    if others:
        text += "\n  also " + "\n  also ".join(others)
    return ConfigError(text, source=source, field=_yaml_path(loc))
