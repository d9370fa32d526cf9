// Package bench measures the controller on a real kube-apiserver: how fast it
// acts on a burst of finished Job pods, how many writes it sends per pod, how
// much memory it holds with a cluster full of other pods, and how much CPU it
// burns — each beside a minimal reference terminator (the yardstick) run the
// same way in the same run, so the figures read as a ratio to what this
// machine allows while the API server is saturated by the burst itself.
//
// The nodes are played by the benchmark: pods are bound to Node objects that
// no kubelet serves, and the benchmark writes their statuses as a kubelet
// would — the main container's exit, then, once the terminator acted (a CRR
// created, or an image swapped), the sidecar's exit and the pod's Succeeded
// phase, as kruise-daemon and a virtual node would bring about. So the burst
// measures the terminator and the API server, not container runtimes.
package bench
