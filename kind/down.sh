#!/usr/bin/env bash
# Delete the kind cluster kind/up.sh made.
set -euo pipefail
cd "$(dirname "$0")/.."
CLUSTER="${KIND_CLUSTER_NAME:-sidecar-terminator}"
"$(go run ./hack/cmd/tool -path kind)" delete cluster --name "$CLUSTER"
