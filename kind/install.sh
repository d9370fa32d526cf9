#!/usr/bin/env bash
# Install sidecar-terminator and the mock virtual node into any cluster whose
# nodes already hold the images `make images` builds (kind/up.sh loads them
# into kind; the local cluster's test imports them into its containerd), and
# wait until both are Ready in-cluster:
#   KUBECONFIG=path kind/install.sh
# OpenKruise is optional: without it the controller stops sidecars by image
# swap only. Extra values, for clusters that need them (`make test` runs it
# on the local cluster with none, as kind/up.sh does):
#   VALUES=file        more values for our chart (after kind/values.yaml)
#   MOCK_NODE_VALUES=file  more values for kind/mock-node
# Needs Go: helm is built from its Go module (hack/tools), kubectl is not used.
set -euo pipefail

cd "$(dirname "$0")/.."
: "${KUBECONFIG:?set KUBECONFIG to the kubeconfig of the cluster}"
export KUBECONFIG
HELM="$(go run ./hack/cmd/tool -path helm)"

extra=()
[[ -n "${VALUES:-}" ]] && extra+=(-f "$VALUES")
"$HELM" upgrade --install sidecar-terminator controller/deploy/chart/sidecar-terminator \
  --namespace sidecar-terminator-system --create-namespace \
  -f kind/values.yaml "${extra[@]}" --wait --timeout 5m

extra=()
[[ -n "${MOCK_NODE_VALUES:-}" ]] && extra+=(-f "$MOCK_NODE_VALUES")
"$HELM" upgrade --install mock-node kind/mock-node \
  --namespace mock-node --create-namespace "${extra[@]}" --wait --timeout 5m

# helm --wait sees the mock node's pod Ready; its Nodes register after that.
"$HELM" get values mock-node --namespace mock-node --all --output json |
  go run ./hack/cmd/wait-nodes --timeout 3m --values-json -
