"""The API server load balancer kind puts in front of several control planes.

kind v0.33.0 runs it from ``docker.io/envoyproxy/envoy`` (``versions.KIND_LB_IMAGE``) as
``envoy -c /home/envoy/envoy.yaml`` in a bash loop, and writes the listener and the backends
(each control plane's ``:6443``, health-checked with ``GET /healthz`` over TLS) into
``/home/envoy/{lds,cds}.yaml``. Envoy is C++ and no registry is reachable, so this builds a
stand-in under that name: the Debian base (bash, coreutils for kind's ``docker exec``
commands) with ``harness/kindlab/go/cmd/lb`` as ``/usr/local/bin/envoy``, which reads the
same files and forwards TCP to the healthy backends, round robin. The image is labelled
``io.powercut.build-key``; an image of that name without the label (a real envoy, pulled
where a registry is reachable) is used as it is and never replaced.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from harness.kindlab import binaries, engine, images
from harness.kindlab import versions as v
from harness.lab.build import Say

DOCKERFILE = """\
FROM {base}
COPY lb /usr/local/bin/envoy
RUN chmod 0755 /usr/local/bin/envoy && mkdir -p /home/envoy
LABEL io.powercut.substitute="kind's load balancer: powercut's TCP stand-in for envoy"
"""


def ensure_image(say: Say) -> str:
    """The load balancer image, built here if missing or out of date; its reference."""
    ref = v.KIND_LB_IMAGE
    binary = binaries.obtain_lb(say)
    key = binary.parent.name
    found = images.image_key(ref)
    if found == key:
        return ref
    if found is None and _exists(ref):
        say(f"load balancer image {ref}: present and not powercut's; used as it is")
        return ref
    t0 = time.monotonic()
    base = images.base_image(say)
    with tempfile.TemporaryDirectory(prefix="lb-", dir=v.kind_cache()) as d:
        ctx = Path(d)
        shutil.copy2(binary, ctx / "lb")
        images._docker_build(ref, ctx, DOCKERFILE.format(base=base), key)
    say(f"  image {ref} (powercut's load balancer) in {time.monotonic() - t0:.1f}s")
    return ref


def _exists(ref: str) -> bool:
    try:
        engine.run(["image", "inspect", "--format", "{{.Id}}", ref])
    except engine.EngineError:
        return False
    return True
