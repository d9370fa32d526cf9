// Package cluster runs a real, local Kubernetes cluster without Docker or
// kind: etcd, kube-apiserver, kube-controller-manager and kube-scheduler
// built from Go modules, one real node (kubelet + containerd + runc + bridge
// CNI), and OpenKruise's kruise-manager and kruise-daemon. Everything
// listens on 127.0.0.1 and is stopped by PID; host changes are undone.
//
// # Binaries
//
// Built on first use and cached outside the repository in
// $SIDECAR_TERMINATOR_CACHE (default $HOME/.cache/sidecar-terminator), one
// directory per component and version:
//
//	kubernetes-v1.35.4/{kube-apiserver,kube-controller-manager,kube-scheduler,kubelet}
//	etcd-v3.6.16/etcd
//
// Kubernetes is built through a generated wrapper module that requires
// k8s.io/kubernetes and replaces each staging module (the list is read from
// kubernetes' own go.mod in the module cache) with its published v0.35.4
// version. Builds hold a file lock (<dir>.lock) so concurrent test binaries
// build once, and write to a temporary dir renamed into place.
//
// # Control plane only
//
//	cp, err := cluster.StartControlPlane(ctx, cluster.Options{
//		ControllerManager: true, // Job controller, GC, ServiceAccounts, root CA
//		Scheduler:         true, // else set pod.spec.nodeName yourself
//		AuditLogPath:      "/tmp/audit.log", // optional: mutating requests, Metadata level
//	})
//	if err != nil { ... }
//	defer cp.Stop() // kills by PID, removes the run dir
//	cs := kubernetes.NewForConfigOrDie(cp.RestConfig) // admin (system:masters)
//	kc, err := cp.ServiceAccountKubeconfig(ctx, "ns", "sa") // least-privilege kubeconfig
//
// Without ControllerManager nothing creates a namespace's `default`
// ServiceAccount or kube-root-ca.crt ConfigMap; StartControlPlane creates
// them for namespace default, and cp.EnsureNamespace(ctx, ns) for others.
// RBAC is on (--authorization-mode=Node,RBAC); the admin identity is a
// client certificate in group system:masters.
//
// # The whole cluster
//
//	c, err := cluster.Up(ctx, cluster.UpOptions{}) // control plane + node + OpenKruise
//	defer c.Stop()                                  // by PID; host restored; fails if anything is left
//	bin, _ := cluster.BuildController(ctx, repoRoot) // <repo>/bin/sidecar-terminator
//	_ = c.ApplyControllerRBAC(ctx, repoRoot)         // controller/deploy/base/rbac.yaml
//	ctl, _ := c.StartController(ctx, bin)            // as ServiceAccount sidecar-terminator-system/sidecar-terminator
//
// Up needs root and containerd, runc and the CNI plugins
// (e2e/hack/install-host-deps.sh). It starts, in order: etcd and
// kube-apiserver, the Kruise CRDs (read from the kruise module in the
// module cache), kube-controller-manager and kube-scheduler, the images
// (package images/oci, imported with ctr), containerd and the kubelet (node
// "st-node", Ready), kruise-manager (webhook on 127.0.0.1, SidecarTerminator
// gate off) and kruise-daemon (through a /hostvarrun symlink to the run
// dir, removed at Stop). Pods use imagePullPolicy Never with
// images.Workload.Ref and images.QuickExit.Ref.
//
// Every process writes <run>/pids/<name>.pid (PID and kernel start time,
// so a recycled PID is never killed) and logs to <run>/logs/<name>.log;
// Down(runDir) stops a cluster from another process, and CheckClean(runDir)
// lists anything left behind. Container logs: <run>/node/pod-logs (the
// kubelet serves only on 127.0.0.1, so `kubectl logs` does not work).
//
// Times on the 2-core development VM: see e2e/README.md.
package cluster
