"""Reading an inventory file: YAML with each value's line kept (duplicate keys refused), then
the models; every problem is one ``ConfigError`` (:mod:`harness.inventory.render`).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml
from pydantic import (
    ValidationError,
)

from harness import budgets as _budgets
from harness.errors import ConfigError
from harness.inventory.models import Inventory
from harness.inventory.render import config_error, line_of, model_keys
from harness.inventory.secrets import InlinePasswordWarning

# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML silently keeps the last one)."""


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> dict[Hashable, Any]:
    loader.flatten_mapping(node)
    seen: dict[Hashable, yaml.Mark] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        if isinstance(key, Hashable) and key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key {key!r} (first at line {seen[key].line + 1})",
                key_node.start_mark,
            )
        if isinstance(key, Hashable):
            seen[key] = key_node.start_mark
    return loader.construct_mapping(node)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_inventory(path: str | os.PathLike[str]) -> Inventory:
    """Read and validate an inventory file. Every problem raises one ``ConfigError``."""
    file = Path(path)
    source = str(file)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError("inventory file not found", source=source) from None
    except IsADirectoryError:
        raise ConfigError("is a directory, not an inventory file", source=source) from None
    except OSError as exc:
        raise ConfigError(
            f"cannot read inventory: {exc.strerror or type(exc).__name__}", source=source
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"is not UTF-8 text (byte {exc.start})", source=source) from None
    inventory = parse_inventory(text, source=source, base_dir=file.resolve().parent)
    inventory._source = file
    return inventory


def parse_inventory(
    text: str, *, source: str = "<string>", base_dir: Path | None = None
) -> Inventory:
    """Validate inventory YAML ``text``; ``source`` names it in errors and warnings.

    Relative paths resolve against ``base_dir`` (default: the current directory).
    """
    tree, data = _parse_yaml(text, source)
    if data is None:
        raise ConfigError(
            f"inventory is empty; expected a mapping with keys: {', '.join(model_keys(Inventory))}",
            source=source,
        )
    if not isinstance(data, dict):
        raise ConfigError(
            f"the top level is a {type(data).__name__}; expected a mapping with keys: "
            f"{', '.join(model_keys(Inventory))}",
            source=source,
        )
    context = {"base_dir": base_dir or Path.cwd()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", InlinePasswordWarning)
        warnings.simplefilter("always", _budgets.BudgetSpellingWarning)
        try:
            inventory = Inventory.model_validate(data, context=context)
        except ValidationError as exc:
            raise config_error(exc, data, tree, source) from None
    # Re-issue warnings pointing at the inventory line rather than at pydantic's internals.
    for caught_warning in caught:
        message = caught_warning.message
        if isinstance(message, InlinePasswordWarning):
            index = inventory.node_names().index(message.node)
            node = inventory.nodes[index]
            where: tuple[str | int, ...] = ("nodes", index, "power", "password")
            if node.power.password is None:
                alternative = next(
                    i for i, p in enumerate(node.power_alternatives) if p.password is not None
                )
                where = ("nodes", index, "power_alternatives", alternative, "password")
            warnings.warn_explicit(message, InlinePasswordWarning, source, line_of(tree, where))
        elif isinstance(message, _budgets.BudgetSpellingWarning):
            where = ("budgets", "overrides", message.written)
            warnings.warn_explicit(
                message, _budgets.BudgetSpellingWarning, source, line_of(tree, where)
            )
        else:
            warnings.warn_explicit(
                message, caught_warning.category, caught_warning.filename, caught_warning.lineno
            )
    return inventory


def _parse_yaml(text: str, source: str) -> tuple[yaml.Node | None, object]:
    loader = _Loader(text)
    try:
        tree = loader.get_single_node()
        data = loader.construct_document(tree) if tree is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = exc.problem or exc.context or "syntax error"
        raise ConfigError(f"invalid YAML{where}: {problem}", source=source) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}", source=source) from None
    finally:
        loader.dispose()
    return tree, data
