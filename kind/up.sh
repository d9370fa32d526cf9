#!/usr/bin/env bash
# Bring up a kind cluster for the e2e suites, the way users run the product:
#   kind/up.sh [K8S_MINOR]     (default 1.34; a config in kind/clusters/vK8S_MINOR.yaml)
# 1. kind cluster from the pinned config (1 control plane + 2 workers);
# 2. OpenKruise from its Helm chart (pinned), kruise-daemon on, its own
#    SidecarTerminator off (this project replaces it);
# 3. the images from `make images` loaded with `kind load image-archive`;
# 4. sidecar-terminator from controller/deploy/chart, waiting until Available;
# 5. the mock virtual node (kind/mock-node) as a Deployment.
# Needs Docker (kind) and Go; helm and kind are built from their Go modules
# (hack/tools). Prints the kubeconfig path last.
set -euo pipefail

cd "$(dirname "$0")/.."
K8S="${1:-${K8S_MINOR:-1.34}}"
CLUSTER="${KIND_CLUSTER_NAME:-sidecar-terminator}"
KRUISE_CHART_VERSION="${KRUISE_CHART_VERSION:-1.8.0}"
IMAGES="${IMAGES_DIR:-bin/images}"
KUBECONFIG_OUT="${KIND_KUBECONFIG:-bin/kind/${CLUSTER}.kubeconfig}"
CONFIG="kind/clusters/v${K8S}.yaml"
[[ -f "$CONFIG" ]] || { echo "no kind config $CONFIG" >&2; exit 2; }

tool() { go run ./hack/cmd/tool "$@"; }
KIND="$(tool -path kind)"
HELM="$(tool -path helm)"
mkdir -p "$(dirname "$KUBECONFIG_OUT")"
export KUBECONFIG="$KUBECONFIG_OUT"

if ! "$KIND" get clusters | grep -qx "$CLUSTER"; then
  "$KIND" create cluster --name "$CLUSTER" --config "$CONFIG" --kubeconfig "$KUBECONFIG_OUT" --wait 5m
fi

# Release images (multi-arch OCI layouts) and the workload image the suites run.
[[ -f "$IMAGES/oci/controller.tar" ]] || go run ./images/cmd/build-images -out "$IMAGES"
for tar in "$IMAGES"/oci/*.tar "$IMAGES/workload.tar"; do
  "$KIND" load image-archive "$tar" --name "$CLUSTER"
done

"$HELM" upgrade --install kruise kruise --repo https://openkruise.github.io/charts/ \
  --version "$KRUISE_CHART_VERSION" --namespace kruise-system --create-namespace \
  --set 'featureGates=KruiseDaemon=true\,SidecarTerminator=false' \
  --wait --timeout 10m

"$HELM" upgrade --install sidecar-terminator controller/deploy/chart/sidecar-terminator \
  --namespace sidecar-terminator-system --create-namespace \
  -f kind/values.yaml --wait --timeout 5m

# The mock node's image exists once e2e/virtualnode does; without it the
# virtual-node cases fail for want of a node, which says why.
if [[ -f "$IMAGES/oci/mock-node.tar" ]]; then
  "$HELM" upgrade --install mock-node kind/mock-node \
    --namespace mock-node --create-namespace --wait --timeout 5m
else
  echo "up.sh: no $IMAGES/oci/mock-node.tar: mock virtual node not deployed" >&2
fi

echo "$KUBECONFIG_OUT"
