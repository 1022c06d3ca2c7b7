#!/usr/bin/env bash
# The host settings the kind stages need (kind's known issue "too many open files"): every
# kind node's kubelet, containerd and pods take inotify instances from the host's per-user
# limit, and the labs that make test runs beside the kind stages take theirs too. At the
# default 128, a worker's containerd restarted by a test failed to start its CRI plugin
# ("couldn't initialize inotify: too many open files") and the node never came back.
# `powercut kind up` only warns about it (it is the host's setting); the test stages, which
# run as root on a machine of their own, raise it, and say so.
set -euo pipefail
want=512
f=/proc/sys/fs/inotify/max_user_instances
have=$(cat "$f")
if [ "$have" -lt "$want" ]; then
  if echo "$want" 2>/dev/null > "$f"; then
    echo "kind-host: fs.inotify.max_user_instances $have -> $want"
  else
    echo "kind-host: fs.inotify.max_user_instances is $have (< $want) and cannot be raised here;" \
      "the kind stages may fail with 'too many open files'" >&2
  fi
fi
