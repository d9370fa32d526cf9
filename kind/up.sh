#!/usr/bin/env bash
# A kind cluster for the e2e suites, the way users run the product:
#   kind/up.sh [K8S_MINOR]     (default 1.37; a config in kind/clusters/vK8S_MINOR.yaml)
# The kind-only steps are here: the cluster (kept from an earlier run when it
# runs the wanted version), its kubeconfig, the images from `make images`
# loaded into the nodes, and OpenKruise. The rest works on any cluster and
# is kind/install.sh, which `make test` also runs against the local cluster.
# Needs Docker (kind) and Go: kind and helm are built from their Go modules
# (hack/tools). Prints the kubeconfig path last.
#
# Overrides:
#   KIND_CONFIG=file        another kind config
#   KIND_NODE_IMAGE=ref     this node image on every node of the config
#   KRUISE_CHART=path       OpenKruise's chart from a directory or .tgz, not its repository
#   KIND_OFFLINE=1          no internet: the steps are the same, but
#     - Docker is kind/hack/dockerd.sh's engine in a network namespace of its
#       own (started here; kind/down.sh stops it), and this script runs in it;
#     - the node image is the one kind/cmd/kindimage builds for this minor;
#     - OpenKruise comes from the pinned kruise module's own config/
#       manifests, its image built here and served by a registry in that
#       namespace, which the nodes' containerd uses as docker.io's mirror.
set -euo pipefail

cd "$(dirname "$0")/.."
K8S="${1:-${K8S_MINOR:-1.37}}"
CLUSTER="${KIND_CLUSTER_NAME:-sidecar-terminator}"
# OpenKruise: the version the local cluster pins (e2e/cluster KruiseVersion).
KRUISE_VERSION="$(sed -n 's/^\s*KruiseVersion *= *"v\(.*\)"/\1/p' e2e/cluster/build.go)"
# Online, OpenKruise's chart of that same version (chart 1.9.1 carries
# kruise-manager v1.9.1: openkruise/charts#182); README "Install on a
# cluster" recommends it, the one version every suite runs.
KRUISE_CHART_VERSION="${KRUISE_CHART_VERSION:-$KRUISE_VERSION}"
IMAGES="${IMAGES_DIR:-bin/images}"
KUBECONFIG_OUT="${KIND_KUBECONFIG:-bin/kind/${CLUSTER}.kubeconfig}"
CONFIG="${KIND_CONFIG:-kind/clusters/v${K8S}.yaml}"
OFFLINE="${KIND_OFFLINE:-0}"
[[ -f "$CONFIG" ]] || { echo "no kind config $CONFIG" >&2; exit 2; }
mkdir -p bin/kind

tool() { go run ./hack/cmd/tool "$@"; }

# Offline: everything that needs the Go proxy or Debian's mirror is built
# here, outside the namespace; then the script goes on inside it.
if [[ "$OFFLINE" == 1 && -z "${KIND_IN_NETNS:-}" ]]; then
  kind/hack/dockerd.sh start
  eval "$(kind/hack/dockerd.sh env)"
  for t in kind helm kustomize crane; do tool -path "$t" >/dev/null; done
  go build -o bin/kind/registry ./hack/cmd/registry
  go build -o bin/kind/wait-nodes ./hack/cmd/wait-nodes
  if [[ -z "${KIND_NODE_IMAGE:-}" ]]; then
    KIND_NODE_IMAGE="$(SIDECAR_TERMINATOR_KUBERNETES="$K8S" go run ./kind/cmd/kindimage)"
  fi
  go run ./kind/cmd/kindimage -out bin/kind/kruise-image.tar kruise-image >/dev/null
  go run ./kind/cmd/kindimage kruise-dir >bin/kind/kruise-dir
  [[ -f "$IMAGES/oci/controller.tar" && -f "$IMAGES/oci/mock-node.tar" && -f "$IMAGES/workload.tar" ]] ||
    go run ./images/cmd/build-images -out "$IMAGES" -platforms "$(go env GOARCH)"
  export KIND_NODE_IMAGE KIND_IN_NETNS=1
  exec kind/hack/dockerd.sh run "$0" "$K8S"
fi

KIND="$(tool -path kind)"
HELM="$(tool -path helm)"
KUBECONFIG_OUT="$(cd "$(dirname "$KUBECONFIG_OUT")" && pwd)/$(basename "$KUBECONFIG_OUT")"
export KUBECONFIG="$KUBECONFIG_OUT"
wait_nodes() { if [[ -x bin/kind/wait-nodes ]]; then bin/kind/wait-nodes "$@"; else go run ./hack/cmd/wait-nodes "$@"; fi; }

# The config as given, or with the node image replaced and, offline, the
# local registry as the nodes' mirror for docker.io.
RUN_CONFIG="$CONFIG"
if [[ -n "${KIND_NODE_IMAGE:-}" || "$OFFLINE" == 1 ]]; then
  RUN_CONFIG="bin/kind/${CLUSTER}-config.yaml"
  sed -E "s#^(\s*image:).*#\1 ${KIND_NODE_IMAGE:-}#" "$CONFIG" >"$RUN_CONFIG"
  [[ -n "${KIND_NODE_IMAGE:-}" ]] || cp "$CONFIG" "$RUN_CONFIG"
fi
if [[ "$OFFLINE" == 1 ]]; then
  # The kind network, made before kind makes it, so that the registry's
  # address on it is known: its gateway, the namespace's side of the bridge.
  SUBNET="${KIND_OFFLINE_SUBNET:-172.18.0.0/16}"
  GATEWAY="${SUBNET%.0/*}.1"
  REGISTRY="$GATEWAY:5000"
  docker network inspect kind >/dev/null 2>&1 ||
    docker network create -d bridge -o com.docker.network.bridge.enable_ip_masquerade=true \
      -o com.docker.network.driver.mtu=1500 --subnet "$SUBNET" --gateway "$GATEWAY" kind >/dev/null
  cat >>"$RUN_CONFIG" <<CFG
# KIND_OFFLINE=1: images docker.io would serve come from the local registry.
containerdConfigPatches:
  - |
    [plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
      endpoint = ["http://$REGISTRY"]
CFG
  if ! [[ -f bin/kind/registry.pid ]] || ! kill -0 "$(cat bin/kind/registry.pid)" 2>/dev/null; then
    rm -f bin/kind/registry.addr
    setsid bin/kind/registry -addr "$REGISTRY" -addr-file bin/kind/registry.addr -blobs bin/kind/registry-blobs \
      </dev/null >bin/kind/registry.log 2>&1 &
    echo $! >bin/kind/registry.pid
    for _ in $(seq 50); do [[ -s bin/kind/registry.addr ]] && break; sleep 0.2; done
    [[ -s bin/kind/registry.addr ]] || { echo "registry did not start: $(cat bin/kind/registry.log)" >&2; exit 1; }
  fi
  "$(tool -path crane)" push --insecure bin/kind/kruise-image.tar "$REGISTRY/openkruise/kruise-manager:v$KRUISE_VERSION" >/dev/null
fi

if ! "$KIND" get clusters | grep -qx "$CLUSTER"; then
  "$KIND" create cluster --name "$CLUSTER" --config "$RUN_CONFIG" --kubeconfig "$KUBECONFIG_OUT" --wait 5m
fi
# Every time: a cluster kept from an earlier run may have its kubeconfig
# removed (make clean) or run another version than the one asked for.
"$KIND" export kubeconfig --name "$CLUSTER" --kubeconfig "$KUBECONFIG_OUT"
wait_nodes --server-version "1.${K8S#1.}" || {
  echo "kind cluster $CLUSTER runs another Kubernetes version than $K8S: kind/down.sh, then again" >&2
  exit 1
}

# Release images (OCI layouts; one architecture is enough for kind) and the
# workload image the suites run.
[[ -f "$IMAGES/oci/controller.tar" && -f "$IMAGES/oci/mock-node.tar" && -f "$IMAGES/workload.tar" ]] ||
  go run ./images/cmd/build-images -out "$IMAGES" -platforms "$(go env GOARCH)"
for tar in "$IMAGES"/oci/*.tar "$IMAGES/workload.tar"; do
  "$KIND" load image-archive "$tar" --name "$CLUSTER"
done

# kubectl as the control-plane node has it (kind puts it there).
kubectl() { docker exec -i "$CLUSTER-control-plane" kubectl --kubeconfig /etc/kubernetes/admin.conf "$@"; }

if [[ "$OFFLINE" == 1 ]]; then
  # OpenKruise from what the pinned kruise module ships: its config/default
  # kustomization (CRDs, RBAC, kruise-manager, kruise-daemon, webhooks),
  # with the chart's image name and the feature gates this script gives the
  # chart below (config/ turns every alpha and beta gate on, OpenKruise's
  # own SidecarTerminator among them).
  KRUISE_DIR="$(cat bin/kind/kruise-dir)"
  overlay="bin/kind/kruise-overlay"
  rm -rf "$overlay" && mkdir -p "$overlay"
  cp -r "$KRUISE_DIR/config" "$overlay/config" && chmod -R u+w "$overlay/config"
  cat >"$overlay/kustomization.yaml" <<KUS
resources:
  - config/default
images:
  - name: controller
    newName: openkruise/kruise-manager
    newTag: v$KRUISE_VERSION
patches:
  - target: {kind: Deployment, name: kruise-controller-manager}
    patch: |
      - op: replace
        path: /spec/template/spec/containers/0/args/3
        value: --feature-gates=ImagePullJobGate=true,SidecarTerminator=false
  - target: {kind: DaemonSet, name: kruise-daemon}
    patch: |
      - op: replace
        path: /spec/template/spec/containers/0/args/2
        value: --feature-gates=ImagePullJobGate=true,SidecarTerminator=false
KUS
  "$(tool -path kustomize)" build "$overlay" | kubectl apply --server-side --force-conflicts -f - >/dev/null
  kubectl -n kruise-system rollout status deployment/kruise-controller-manager --timeout 10m
  kubectl -n kruise-system rollout status daemonset/kruise-daemon --timeout 10m
else
  # OpenKruise as its install guide does it: `helm install kruise
  # openkruise/kruise --version X` from https://openkruise.github.io/charts/,
  # with no --namespace and no --create-namespace: the chart creates its
  # namespace itself (values.yaml `installation.namespace: kruise-system`,
  # `installation.createNamespace: true`; templates/manager.yaml renders that
  # Namespace), and helm would stop on "namespaces kruise-system already
  # exists" if asked to create it too. featureGates replaces the chart's
  # default ("ImagePullJobGate=true", kept); kruise-daemon is on unless it
  # says KruiseDaemon=false; OpenKruise's own SidecarTerminator is off, as
  # this project does its work.
  chart=(kruise --repo https://openkruise.github.io/charts/ --version "$KRUISE_CHART_VERSION")
  [[ -n "${KRUISE_CHART:-}" ]] && chart=("$KRUISE_CHART")
  "$HELM" upgrade --install kruise "${chart[@]}" \
    --set 'featureGates=ImagePullJobGate=true\,SidecarTerminator=false' \
    --wait --timeout 10m
fi

KUBECONFIG="$KUBECONFIG_OUT" kind/install.sh

echo "$KUBECONFIG_OUT"
