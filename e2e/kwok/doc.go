// Package kwok runs Jobs at scale through a real control plane whose nodes
// are kwok's (sigs.k8s.io/kwok, e2e/cluster.StartKwok): the real
// kube-apiserver, scheduler and Job controller, with kwok playing every
// kubelet by the stages in e2e/cluster/kwokstages. Each Job has one main and
// one sidecar marked with KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE;
// on kwok's nodes, labelled type=virtual-kubelet, a terminator stops the
// sidecar by swapping in the quick-exit image, which kwok then ends with
// exit 0. Run measures, per terminator (this controller, OpenKruise's
// SidecarTerminator, none), the main's exit → Job Complete and the
// terminator's share of it.
//
// kwok touches nothing on the host: every process listens on 127.0.0.1
// and keeps its state in a temporary run directory, so this package takes
// no host-wide lock. `make kwok-scale` runs the full size; the test here
// runs a small one with this controller.
package kwok
