#!/usr/bin/env bash
# The lab's binaries (what `powercut lab build` does), also before the virtualenv exists: the
# build needs only Python's standard library and Go, so a cold `make demo` or `make test` runs
# it beside the installs (pip, apt, npm) instead of after them.
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
[ -x "$py" ] || py="${PYTHON:-python3}"
exec "$py" -c '
import sys, time
sys.path.insert(0, ".")
from harness.lab import build
t0 = time.monotonic()
bins = build.obtain()
for group, source in bins.sources.items():
    print(f"{group}: {source}")
print(f"lab binaries ready in {time.monotonic() - t0:.1f}s")
'
