#!/usr/bin/env bash
# Delete the kind cluster kind/up.sh made. With KIND_OFFLINE=1 also stop
# the local registry and kind/hack/dockerd.sh's engine, which checks that
# the host's iptables rules and interfaces are as they were.
set -euo pipefail
cd "$(dirname "$0")/.."
CLUSTER="${KIND_CLUSTER_NAME:-sidecar-terminator}"
KIND="$(go run ./hack/cmd/tool -path kind)"
if [[ "${KIND_OFFLINE:-0}" != 1 ]]; then
  "$KIND" delete cluster --name "$CLUSTER"
  exit 0
fi
if kind/hack/dockerd.sh status >/dev/null 2>&1; then
  kind/hack/dockerd.sh run "$KIND" delete cluster --name "$CLUSTER"
fi
if [[ -f bin/kind/registry.pid ]]; then
  pid="$(cat bin/kind/registry.pid)"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  fi
  rm -f bin/kind/registry.pid bin/kind/registry.addr
  rm -rf bin/kind/registry-blobs
fi
kind/hack/dockerd.sh stop
