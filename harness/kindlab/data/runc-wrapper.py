#!/usr/bin/python3
"""OCI runtime wrapper installed by `powercut kind up` where privileged containers fail
because the machine's capability bounding set lacks CAP_SYS_RESOURCE: drops that one
capability from the container's config (create/run: --bundle DIR) or from the process
file (exec: --process FILE), then execs runc with the same arguments."""

import json
import os
import sys

RUNC = "/usr/sbin/runc"
CAP = "CAP_SYS_RESOURCE"


def arg(name: str) -> str | None:
    args = sys.argv[1:]
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(name + "="):
            return a.split("=", 1)[1]
    return None


def strip(path: str, key: str | None) -> None:
    try:
        with open(path) as fh:
            doc = json.load(fh)
    except (OSError, ValueError):
        return
    holder = doc.get(key) if key else doc
    caps = holder.get("capabilities") if isinstance(holder, dict) else None
    if not isinstance(caps, dict):
        return
    changed = False
    for kind, values in caps.items():
        if isinstance(values, list) and CAP in values:
            caps[kind] = [c for c in values if c != CAP]
            changed = True
    if changed:
        tmp = path + ".powercut-tmp"
        with open(tmp, "w") as fh:
            json.dump(doc, fh)
        os.replace(tmp, path)


verbs = {a for a in sys.argv[1:] if not a.startswith("-")}
if "create" in verbs or "run" in verbs:
    bundle = arg("--bundle") or arg("-b") or "."
    strip(os.path.join(bundle, "config.json"), "process")
if "exec" in verbs:
    process = arg("--process") or arg("-p")
    if process:
        strip(process, None)
os.execv(RUNC, [RUNC, *sys.argv[1:]])  # noqa: S606 (runc, same arguments)
