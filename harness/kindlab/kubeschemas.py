"""JSON schemas of Kubernetes' kinds for kubeconform (``scripts/chart-check.sh``: the chart's
rendered manifests checked against the API of the Kubernetes version the kind stage runs),
made from the OpenAPI document the Kubernetes source ships
(``k8s.io/kubernetes@<version>/api/openapi-spec/swagger.json``, from the Go module proxy)
and cached by version in ``~/.cache/powercut/bin/kube-schemas-<version>/``.

One file per kind and version, named as kubeconform's ``{{ .ResourceKind }}{{ .KindSuffix }}``
names it (``cronjob-batch-v1.json``, ``service-v1.json``), holding the kind's definition and
every definition it refers to. Strict, as kubeconform's ``-strict`` schemas are: an object
with declared properties allows no others (a misspelt field fails), and the two types the
API accepts as a string or a number (IntOrString, Quantity) accept both.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from harness.lab import versions as lab_versions
from harness.lab.build import BuildError, Say, _go, _go_env

#: What the API takes as a string or a number.
STRING_OR_NUMBER = {
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": [{"type": "string"}, {"type": "integer"}],
    "io.k8s.apimachinery.pkg.api.resource.Quantity": [{"type": "string"}, {"type": "number"}],
}
_REF = "#/definitions/"


def file_name(group: str, version: str, kind: str) -> str:
    """kubeconform's name for a kind's schema: kind, the group's first label, version."""
    suffix = f"-{group.split('.')[0].lower()}" if group else ""
    return f"{kind.lower()}{suffix}-{version.lower()}.json"


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, Mapping):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_REF):
            yield ref[len(_REF) :]
        for v in node.values():
            yield from _refs(v)
    elif isinstance(node, list):
        for v in node:
            yield from _refs(v)


def _closure(defs: Mapping[str, Any], root: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    todo = [root]
    while todo:
        name = todo.pop()
        if name in seen or name not in defs:
            continue
        seen[name] = defs[name]
        todo.extend(_refs(defs[name]))
    return seen


def _strict(name: str, d: Mapping[str, Any]) -> dict[str, Any]:
    if name in STRING_OR_NUMBER:
        return {"description": d.get("description", ""), "oneOf": STRING_OR_NUMBER[name]}
    out = dict(d)
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def schemas(swagger: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """File name -> schema, for every kind the OpenAPI document declares."""
    defs: Mapping[str, Any] = swagger["definitions"]
    out: dict[str, dict[str, Any]] = {}
    for name, d in defs.items():
        for gvk in d.get("x-kubernetes-group-version-kind") or ():
            needed = _closure(defs, name)
            out[file_name(gvk["group"], gvk["version"], gvk["kind"])] = {
                "$schema": "http://json-schema.org/draft-07/schema#",
                **_strict(name, d),
                "definitions": {n: _strict(n, v) for n, v in needed.items()},
            }
    return out


def _swagger(version: str, say: Say) -> Path:
    """The OpenAPI document of ``k8s.io/kubernetes@version`` (Go module cache)."""
    say(f"kubernetes {version}: the OpenAPI document from the Go module proxy")
    with tempfile.TemporaryDirectory(prefix="kube-schemas-") as d:
        r = subprocess.run(
            [_go(), "mod", "download", "-json", f"k8s.io/kubernetes@{version}"],
            cwd=d,
            env=_go_env(Path(d)),
            capture_output=True,
            text=True,
            check=False,
        )
    if r.returncode != 0:
        raise BuildError(f"go mod download k8s.io/kubernetes@{version}: {r.stdout}{r.stderr}")
    path = Path(json.loads(r.stdout)["Dir"]) / "api" / "openapi-spec" / "swagger.json"
    if not path.is_file():
        raise BuildError(f"k8s.io/kubernetes@{version} has no {path}")
    return path


def obtain(version: str, say: Say) -> Path:
    """The directory of the kinds' schemas of Kubernetes ``version``, made once."""
    dest = lab_versions.bin_cache() / f"kube-schemas-{version}"
    if (dest / ".complete").is_file():
        return dest
    swagger = json.loads(_swagger(version, say).read_text(encoding="utf-8"))
    tmp = Path(tempfile.mkdtemp(prefix=f".kube-schemas-{version}-", dir=dest.parent))
    try:
        made = schemas(swagger)
        for fname, schema in made.items():
            (tmp / fname).write_text(json.dumps(schema), encoding="utf-8")
        (tmp / ".complete").write_text(f"{len(made)} schemas\n")
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    say(f"kubernetes {version}: {len(made)} kinds' schemas in {dest}")
    return dest
