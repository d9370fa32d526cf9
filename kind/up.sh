#!/usr/bin/env bash
# A kind cluster for the e2e suites, the way users run the product:
#   kind/up.sh [K8S_MINOR]     (default 1.30; a config in kind/clusters/vK8S_MINOR.yaml)
# The kind-only steps are here: the cluster (kept from an earlier run when it
# runs the wanted version), its kubeconfig, the images from `make images`
# loaded into the nodes, and OpenKruise's published chart (a download). The
# rest works on any cluster and is kind/install.sh, which `make test` also
# runs against the local cluster. Needs Docker (kind) and Go: kind and helm
# are built from their Go modules (hack/tools). Prints the kubeconfig path last.
set -euo pipefail

cd "$(dirname "$0")/.."
K8S="${1:-${K8S_MINOR:-1.30}}"
CLUSTER="${KIND_CLUSTER_NAME:-sidecar-terminator}"
# OpenKruise 1.8.3: its own e2e runs Kubernetes 1.24 to 1.30 on kind
# (kind/README.md), the minors of kind/clusters.
KRUISE_CHART_VERSION="${KRUISE_CHART_VERSION:-1.8.3}"
IMAGES="${IMAGES_DIR:-bin/images}"
KUBECONFIG_OUT="${KIND_KUBECONFIG:-bin/kind/${CLUSTER}.kubeconfig}"
CONFIG="kind/clusters/v${K8S}.yaml"
[[ -f "$CONFIG" ]] || { echo "no kind config $CONFIG" >&2; exit 2; }

tool() { go run ./hack/cmd/tool "$@"; }
KIND="$(tool -path kind)"
HELM="$(tool -path helm)"
mkdir -p "$(dirname "$KUBECONFIG_OUT")"
KUBECONFIG_OUT="$(cd "$(dirname "$KUBECONFIG_OUT")" && pwd)/$(basename "$KUBECONFIG_OUT")"
export KUBECONFIG="$KUBECONFIG_OUT"

if ! "$KIND" get clusters | grep -qx "$CLUSTER"; then
  "$KIND" create cluster --name "$CLUSTER" --config "$CONFIG" --kubeconfig "$KUBECONFIG_OUT" --wait 5m
fi
# Every time: a cluster kept from an earlier run may have its kubeconfig
# removed (make clean) or run another version than the one asked for.
"$KIND" export kubeconfig --name "$CLUSTER" --kubeconfig "$KUBECONFIG_OUT"
go run ./hack/cmd/wait-nodes --server-version "1.${K8S#1.}" || {
  echo "kind cluster $CLUSTER runs another Kubernetes version than $K8S: kind/down.sh, then again" >&2
  exit 1
}

# Release images (multi-arch OCI layouts) and the workload image the suites run.
[[ -f "$IMAGES/oci/controller.tar" && -f "$IMAGES/oci/mock-node.tar" ]] || go run ./images/cmd/build-images -out "$IMAGES"
for tar in "$IMAGES"/oci/*.tar "$IMAGES/workload.tar"; do
  "$KIND" load image-archive "$tar" --name "$CLUSTER"
done

# OpenKruise as its install guide does it: `helm install kruise
# openkruise/kruise --version X` from https://openkruise.github.io/charts/,
# with no --namespace and no --create-namespace: the chart creates its
# namespace itself (openkruise/charts versions/kruise/1.8.3: values.yaml
# `installation.namespace: kruise-system`, `installation.createNamespace:
# true`; templates/manager.yaml renders that Namespace), and helm would stop
# on "namespaces kruise-system already exists" if asked to create it too.
# featureGates replaces the chart's default ("ImagePullJobGate=true", kept);
# kruise-daemon is on unless it says KruiseDaemon=false (templates/manager.yaml
# renders the DaemonSet then); OpenKruise's own SidecarTerminator is off, as
# this project does its work.
"$HELM" upgrade --install kruise kruise --repo https://openkruise.github.io/charts/ \
  --version "$KRUISE_CHART_VERSION" \
  --set 'featureGates=ImagePullJobGate=true\,SidecarTerminator=false' \
  --wait --timeout 10m

KUBECONFIG="$KUBECONFIG_OUT" kind/install.sh

echo "$KUBECONFIG_OUT"
