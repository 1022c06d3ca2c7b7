"""The target cluster's ClusterRole (deploy/rbac/target-clusterrole.yaml) grants exactly what
powercut's code asks the API server for: no request it lacks, no permission nobody uses.

The code is read, not run: every call of the Kubernetes client (``get``, ``list``, ``watch``,
``create``, ``patch``, ``delete``, ``request`` ...) in the library and the steps is found in
the syntax tree and its path followed back to the string it is built from: a literal or
f-string, a local variable, a module constant, an attribute set in ``__init__``, a helper's
return value, a parameter filled in by the module's own callers (or, for a function the
module does not call itself, by the modules that import it), or a dictionary of plurals
(every value). :func:`harness.kube.access.access_of` then turns method and path into the verb
and resource the API server authorizes, the same rule that names a missing permission in a
403. A call whose path cannot be followed fails the test, naming its file and line: write the
path so it can be, or the role could not be kept true.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from harness.kube.access import Access, access_of
from harness.kube.apierrors import error_for as _error_for
from harness.kube.client import Forbidden

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "deploy" / "rbac" / "target-clusterrole.yaml"

#: What is scanned: the library and the steps. Not the lab and kind clusters (they build the
#: cluster, with its admin credentials), nor the Prometheus client (another API).
SCANNED = [REPO / "harness", REPO / "steps"]
NOT_SCANNED = {"harness/lab", "harness/kindlab", "harness/slo/client.py"}

#: client method -> HTTP method ("LIST": GET on a collection, "WATCH": a watch)
CLIENT_METHODS = {
    "get": "GET",
    "get_or_none": "GET",
    "list": "GET",
    "pages": "GET",
    "watch": "WATCH",
    "create": "POST",
    "replace": "PUT",
    "patch": "PATCH",
    "apply": "PATCH",
    "delete": "DELETE",
    "request": None,  # the method is the first argument
    "request_raw": None,
}
#: the expressions that hold a KubeClient in the code
CLIENTS = {"client", "self.client", "session.client", "kube", "self._client", "self.kube"}

PLACEHOLDER = "x"  # a namespace or a name: any path segment


@dataclass
class Module:
    path: Path
    rel: str
    tree: ast.Module
    name: str
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node

    def enclosing(self, node: ast.AST, kind: type | tuple[type, ...]) -> ast.AST | None:
        cur = self.parents.get(node)
        while cur is not None and not isinstance(cur, kind):
            cur = self.parents.get(cur)
        return cur

    def value_of(self, name: str) -> object:
        return getattr(importlib.import_module(self.name), name, None)


class Unresolved(Exception):
    pass


FUNC = (ast.FunctionDef, ast.AsyncFunctionDef)


def _templates(mod: Module, expr: ast.expr, depth: int = 0) -> list[str]:
    """Every string ``expr`` can be, with ``{}`` parts that stay unknown as ``x``."""
    if depth > 8:
        raise Unresolved("too deep")
    if isinstance(expr, ast.Constant):
        if expr.value is None:
            return []
        if isinstance(expr.value, str):
            return [expr.value]
        raise Unresolved(ast.unparse(expr))
    if isinstance(expr, ast.JoinedStr):
        return _joined(mod, expr, depth)
    if isinstance(expr, ast.IfExp):
        return _templates(mod, expr.body, depth + 1) + _templates(mod, expr.orelse, depth + 1)
    if isinstance(expr, ast.BoolOp):
        return [t for v in expr.values for t in _templates(mod, v, depth + 1)]
    if isinstance(expr, ast.Subscript) and isinstance(expr.value, ast.Name):
        table = mod.value_of(expr.value.id)
        if isinstance(table, dict) and all(isinstance(v, str) for v in table.values()):
            return sorted(set(table.values()))
        raise Unresolved(ast.unparse(expr))
    if isinstance(expr, ast.Name):
        return _name(mod, expr, depth)
    if (
        isinstance(expr, ast.Attribute)
        and isinstance(expr.value, ast.Name)
        and expr.value.id == "self"
    ):
        return _self_attribute(mod, expr, depth)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name):
        return _helper(mod, expr.func.id, depth)
    raise Unresolved(ast.unparse(expr))


def _joined(mod: Module, expr: ast.JoinedStr, depth: int) -> list[str]:
    # Attributes of one unknown object (handler.api, handler.resource): one template per
    # class of the module that defines them all as class constants.
    owners = {
        v.value.value.id
        for v in expr.values
        if isinstance(v, ast.FormattedValue)
        and isinstance(v.value, ast.Attribute)
        and isinstance(v.value.value, ast.Name)
        and v.value.value.id not in ("self",)
        and not _is_local(mod, expr, v.value.value.id)
    }
    if owners:
        per_class = _per_class(mod, expr, owners)
        if per_class:
            return per_class
    out = [""]
    for v in expr.values:
        if isinstance(v, ast.Constant):
            out = [o + str(v.value) for o in out]
            continue
        assert isinstance(v, ast.FormattedValue)
        try:
            parts = _templates(mod, v.value, depth + 1)
        except Unresolved:
            parts = [PLACEHOLDER]
        if not all(p.startswith("/") or "/" not in p for p in parts):
            parts = [PLACEHOLDER]
        out = [o + p for o in out for p in parts]
    return out


def _is_local(mod: Module, at: ast.AST, name: str) -> bool:
    func = mod.enclosing(at, FUNC)
    if func is None:
        return False
    assert isinstance(func, FUNC)
    return any(
        isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store)
        for n in ast.walk(func)
    )


def _per_class(mod: Module, expr: ast.JoinedStr, owners: set[str]) -> list[str]:
    attrs = {
        v.value.attr
        for v in expr.values
        if isinstance(v, ast.FormattedValue)
        and isinstance(v.value, ast.Attribute)
        and isinstance(v.value.value, ast.Name)
        and v.value.value.id in owners
    }
    out = []
    # the classes of the module and of its package's other modules (a handler's constants
    # may live beside the watch loop that builds the path from them)
    package = [m for m in _modules() if m.path.parent == mod.path.parent and m is not mod]
    classes = (n for m in (mod, *package) for n in m.tree.body if isinstance(n, ast.ClassDef))
    for cls in classes:
        consts = {
            t.id: s.value.value
            for s in cls.body
            if isinstance(s, ast.Assign | ast.AnnAssign)
            and isinstance(s.value, ast.Constant)
            and isinstance(s.value.value, str)
            for t in (s.targets if isinstance(s, ast.Assign) else [s.target])
            if isinstance(t, ast.Name)
        }
        if not attrs <= consts.keys():
            continue
        text = ""
        for v in expr.values:
            if isinstance(v, ast.Constant):
                text += str(v.value)
            elif (
                isinstance(v, ast.FormattedValue)
                and isinstance(v.value, ast.Attribute)
                and isinstance(v.value.value, ast.Name)
                and v.value.value.id in owners
            ):
                text += consts[v.value.attr]
            else:
                text += "{}"
        out.append(text)
    if not out:
        return []
    # the optional middle parts ({ns}: "" or "/namespaces/x") both ways
    return [t.replace("{}", part) for t in out for part in ("", f"/namespaces/{PLACEHOLDER}")]


def _name(mod: Module, expr: ast.Name, depth: int) -> list[str]:
    func = mod.enclosing(expr, FUNC)
    while func is not None:
        assert isinstance(func, FUNC)
        found = list(_assigned(mod, func, expr.id, depth))
        if found:
            return found
        params = [a.arg for a in func.args.posonlyargs + func.args.args + func.args.kwonlyargs]
        if expr.id in params:
            return _from_callers(mod, func, expr.id, depth)
        func = mod.enclosing(func, FUNC)  # a closure's free variable
    value = mod.value_of(expr.id)
    if isinstance(value, str):
        return [value]
    raise Unresolved(expr.id)


def _assigned(mod: Module, func: ast.AST, name: str, depth: int) -> Iterator[str]:
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            yield from _templates(mod, node.value, depth + 1)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if node.target.id == name and node.value is not None:
                yield from _templates(mod, node.value, depth + 1)
        elif (
            isinstance(node, ast.For)
            and isinstance(node.target, ast.Name)
            and node.target.id == name
        ):
            yield from _elements(mod, node.iter, depth + 1)


def _elements(mod: Module, expr: ast.expr, depth: int) -> list[str]:
    if isinstance(expr, ast.List | ast.Tuple):
        return [t for e in expr.elts for t in _templates(mod, e, depth)]
    if isinstance(expr, ast.ListComp):
        return _templates(mod, expr.elt, depth)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        return _elements(mod, expr.left, depth) + _elements(mod, expr.right, depth)
    raise Unresolved(ast.unparse(expr))


def _self_attribute(mod: Module, expr: ast.Attribute, depth: int) -> list[str]:
    cls = mod.enclosing(expr, ast.ClassDef)
    if cls is None:
        raise Unresolved(ast.unparse(expr))
    out = []
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if (
                    isinstance(t, ast.Attribute)
                    and isinstance(t.value, ast.Name)
                    and t.value.id == "self"
                    and t.attr == expr.attr
                ):
                    out += _templates(mod, node.value, depth + 1)
    if not out:
        raise Unresolved(ast.unparse(expr))
    return out


def _helper(mod: Module, name: str, depth: int) -> list[str]:
    for node in mod.tree.body:
        if isinstance(node, FUNC) and node.name == name:
            return [
                t
                for r in ast.walk(node)
                if isinstance(r, ast.Return) and r.value is not None
                for t in _templates(mod, r.value, depth + 1)
            ]
    raise Unresolved(f"{name}()")


def _from_callers(mod: Module, func: ast.AST, param: str, depth: int) -> list[str]:
    """What the callers of ``func`` pass as ``param``: the module's own calls of it (a
    module's function that it does not call itself: the calls of the modules that import it
    by name); a constructor's parameter, every call of its class in the scanned code."""
    assert isinstance(func, FUNC)
    positional = [a.arg for a in func.args.posonlyargs + func.args.args]
    wanted, callers = func.name, [mod]
    if func.name == "__init__":
        cls = mod.enclosing(func, ast.ClassDef)
        assert isinstance(cls, ast.ClassDef)
        wanted, callers = cls.name, _modules()
    imported = isinstance(mod.parents.get(func), ast.Module) and not _calls(mod, wanted)
    if imported:
        callers = [m for m in _modules() if _imports(m, mod.name, wanted)]
    out: list[str] = []
    seen = False
    for caller in callers:
        for call in ast.walk(caller.tree):
            if not isinstance(call, ast.Call):
                continue
            callee = call.func
            called = callee.id if isinstance(callee, ast.Name) else getattr(callee, "attr", None)
            if called != wanted:
                continue
            seen = True
            offset = 1 if positional[:1] == ["self"] else 0
            offset -= 1 if offset and isinstance(callee, ast.Name) and wanted == func.name else 0
            arg: ast.expr | None = None
            at = positional.index(param) - offset if param in positional else len(call.args)
            if at < len(call.args):
                arg = call.args[at]
            for kw in call.keywords:
                if kw.arg == param:
                    arg = kw.value
            if arg is not None:
                out += _templates(caller, arg, depth + 1)
    if not seen or (imported and not out):
        raise Unresolved(f"parameter {param} of {wanted}() (no caller found)")
    return out


def _calls(mod: Module, name: str) -> bool:
    """Whether ``mod`` calls a function named ``name`` (by its bare name)."""
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == name
        for n in ast.walk(mod.tree)
    )


def _imports(mod: Module, module: str, name: str) -> bool:
    """Whether ``mod`` imports ``name`` from ``module`` (``from module import name``)."""
    return any(
        isinstance(n, ast.ImportFrom)
        and n.module == module
        and any(a.name == name for a in n.names)
        for n in ast.walk(mod.tree)
    )


@dataclass(frozen=True)
class Call:
    where: str
    method: str
    path: str


_MODULES: list[Module] = []


def _modules() -> list[Module]:
    """The scanned modules, parsed once."""
    if not _MODULES:
        for path in sorted(p for root in SCANNED for p in root.rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if any(rel == n or rel.startswith(n + "/") for n in NOT_SCANNED):
                continue
            parts = rel.removesuffix(".py").split("/")
            prefix = ["harness"] if parts[0] == "harness" else ["harness", "steps"]
            name = ".".join(prefix + parts[1:]).removesuffix(".__init__")
            _MODULES.append(Module(path, rel, ast.parse(path.read_text()), name))
    return _MODULES


def client_calls() -> tuple[list[Call], list[str]]:
    """Every client call of the scanned code with each path it can reach; and the calls
    whose path could not be followed (file:line and why)."""
    calls: list[Call] = []
    unresolved: list[str] = []
    for mod in _modules():
        rel = mod.rel
        for node in ast.walk(mod.tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr not in CLIENT_METHODS or ast.unparse(node.func.value) not in CLIENTS:
                continue
            where = f"{rel}:{node.lineno}"
            args = list(node.args)
            method = CLIENT_METHODS[node.func.attr]
            try:
                if method is None:
                    if not (isinstance(args[0], ast.Constant) and isinstance(args[0].value, str)):
                        raise Unresolved(f"method {ast.unparse(args[0])}")
                    method, args = args[0].value, args[1:]
                paths = _templates(mod, args[0])
            except (Unresolved, IndexError) as exc:
                unresolved.append(f"{where}: {ast.unparse(node)[:80]}: cannot follow {exc}")
                continue
            calls += [Call(where, method, p) for p in paths]
    return calls, unresolved


def used() -> dict[Access, list[str]]:
    calls, unresolved = client_calls()
    assert not unresolved, "client calls whose path cannot be followed:\n" + "\n".join(unresolved)
    out: dict[Access, list[str]] = {}
    for c in calls:
        out.setdefault(access_of(c.method, c.path), []).append(c.where)
    return out


def granted() -> set[Access]:
    doc = yaml.safe_load(ROLE.read_text())
    assert doc["kind"] == "ClusterRole" and doc["apiVersion"] == "rbac.authorization.k8s.io/v1"
    out: set[Access] = set()
    for rule in doc["rules"]:
        for verb in rule["verbs"]:
            for url in rule.get("nonResourceURLs") or []:
                out.add(Access("", url, verb))
            for group in rule.get("apiGroups") or []:
                for resource in rule["resources"]:
                    out.add(Access(group, resource, verb))
    return out


def test_the_scan_finds_the_client_calls() -> None:
    """A floor, so a scan that silently stops finding calls cannot pass."""
    calls, _ = client_calls()
    files = {c.where.split(":")[0] for c in calls}
    assert len(calls) >= 60, len(calls)
    for expected in (
        "harness/kube/actions.py",
        "harness/kube/observer/watch.py",
        "harness/kube/lock.py",
    ):
        assert expected in files


def test_the_role_grants_every_permission_the_code_uses() -> None:
    missing = {a: where for a, where in used().items() if a not in granted()}
    assert not missing, "the ClusterRole lacks:\n" + "\n".join(
        f"  {a}: used at {', '.join(sorted(set(w))[:4])}" for a, w in sorted(missing.items())
    )


def test_the_role_grants_nothing_the_code_does_not_use() -> None:
    unused = sorted(granted() - used().keys())
    assert not unused, "the ClusterRole grants what no code uses:\n" + "\n".join(
        f"  {a}" for a in unused
    )


@pytest.mark.parametrize(
    ("method", "path", "expected"),
    [
        ("GET", "/api/v1/nodes", Access("", "nodes", "list")),
        ("GET", "/api/v1/nodes/w1", Access("", "nodes", "get")),
        ("WATCH", "/api/v1/pods", Access("", "pods", "watch")),
        ("GET", "/api/v1/pods?watch=1&resourceVersion=5", Access("", "pods", "watch")),
        ("PATCH", "/api/v1/nodes/w1", Access("", "nodes", "patch")),
        ("POST", "/api/v1/namespaces/a/pods/p/eviction", Access("", "pods/eviction", "create")),
        ("PUT", "/api/v1/namespaces/a/pods/p:8080/proxy/t", Access("", "pods/proxy", "update")),
        ("DELETE", "/apis/batch/v1/namespaces/a/jobs/j", Access("batch", "jobs", "delete")),
        ("POST", "/apis/batch/v1/namespaces/a/jobs", Access("batch", "jobs", "create")),
        ("GET", "/api/v1/namespaces/kube-system", Access("", "namespaces", "get")),
        ("GET", "/version", Access("", "/version", "get")),
        ("GET", "/readyz?verbose=true", Access("", "/readyz", "get")),
    ],
)
def test_a_request_needs_the_permission_the_api_server_checks(
    method: str, path: str, expected: Access
) -> None:
    assert access_of(method, path) == expected


def test_a_403_names_the_verb_and_resource_and_is_permanent() -> None:
    err = _error_for(403)(
        403, "Forbidden", 'nodes "w1" is forbidden: ...', "PATCH", "/api/v1/nodes/w1"
    )
    assert isinstance(err, Forbidden)
    text = str(err)
    assert "lack the permission patch on 'nodes' in the core API group" in text
    assert "(grant it: powercut rbac, docs/rbac.md)" in text
    assert 'nodes "w1" is forbidden' in text
    from harness.errors import PermanentError, TemporaryError

    assert isinstance(err, PermanentError) and not isinstance(err, TemporaryError)
