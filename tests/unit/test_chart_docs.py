"""deploy/chart/README.md's values table is what scripts/gen_chart_readme.py makes from
values.yaml; and the Kubernetes schemas kubeconform checks the chart with are made strictly."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from harness.kindlab import kubeschemas

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_chart_readme", ROOT / "scripts" / "gen_chart_readme.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_chart_readme_is_current() -> None:
    gen = _generator()
    assert (ROOT / "deploy" / "chart" / "README.md").read_text(encoding="utf-8") == gen.render(), (
        "deploy/chart/README.md is out of date with values.yaml: "
        "run `python scripts/gen_chart_readme.py` and commit the result"
    )


def test_every_key_of_values_yaml_is_a_row_with_its_comment() -> None:
    gen = _generator()
    text = """# top comment, apart

image:
  # where from
  repository: r   # trailing
  tag: ""                       # one
                                # continued
  list: [a, "b # not a comment"]
targets: []
"""
    rows = {r.path: r for r in gen.rows(text)}
    assert list(rows) == ["image", "image.repository", "image.tag", "image.list", "targets"]
    assert rows["image"].description == ""
    assert rows["image.repository"].description == "where from trailing"
    assert rows["image.tag"].description == "one continued"
    assert rows["image.list"].default == '[a, "b # not a comment"]'
    table = gen.table(text)
    assert "| `image.repository` | `r` | where from trailing |" in table


def test_schema_file_names_follow_kubeconform() -> None:
    assert kubeschemas.file_name("batch", "v1", "CronJob") == "cronjob-batch-v1.json"
    assert kubeschemas.file_name("", "v1", "Service") == "service-v1.json"
    assert kubeschemas.file_name("networking.k8s.io", "v1", "Ingress") == (
        "ingress-networking-v1.json"
    )


IOS = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"


def test_schemas_are_strict_and_hold_what_they_refer_to() -> None:
    gvk = [{"group": "x.io", "version": "v1", "kind": "Thing"}]
    swagger = {
        "definitions": {
            "a.Thing": {
                "type": "object",
                "properties": {"spec": {"$ref": "#/definitions/a.Spec"}},
                "x-kubernetes-group-version-kind": gvk,
            },
            "a.Spec": {
                "type": "object",
                "properties": {"port": {"$ref": f"#/definitions/{IOS}"}},
            },
            "a.Map": {"type": "object", "additionalProperties": {"type": "string"}},
            IOS: {"type": "string", "format": "int-or-string"},
            "unused.Other": {"type": "object", "properties": {}},
        }
    }  # fmt: skip
    (name, schema), *rest = kubeschemas.schemas(swagger).items()
    assert not rest and name == "thing-x-v1.json"
    assert schema["additionalProperties"] is False
    assert set(schema["definitions"]) == {"a.Thing", "a.Spec", IOS}
    assert schema["definitions"]["a.Spec"]["additionalProperties"] is False
    ios = schema["definitions"][IOS]
    assert ios["oneOf"] == [{"type": "string"}, {"type": "integer"}]
