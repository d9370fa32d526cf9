package kube

// Permission is one API permission the controller needs.
type Permission struct {
	Group, Resource string
	Verbs           []string
	// Namespaced permissions are granted in the controller's own namespace only.
	Namespaced bool
}

// Permissions lists every API call the controller makes, for RBAC: the deploy
// manifests grant exactly these (a test checks it), and the real-API-server
// test runs the binary under that grant.
var Permissions = []Permission{
	{Group: "", Resource: "pods", Verbs: []string{"get", "list", "watch", "patch"}},                                               // informer; LiveReader; image swap
	{Group: "", Resource: "pods/status", Verbs: []string{"patch"}},                                                                // ignore-exit-code phase settling
	{Group: "", Resource: "nodes", Verbs: []string{"get", "list", "watch"}},                                                       // metadata informer; LiveReader
	{Group: "batch", Resource: "jobs", Verbs: []string{"get"}},                                                                    // a failed pod's Job, read live before a CRR (podFailurePolicy)
	{Group: "apps.kruise.io", Resource: "containerrecreaterequests", Verbs: []string{"create", "delete", "get", "list", "watch"}}, // delete: a stop order's earlier stage
	{Group: "apps.kruise.io", Resource: "nodeimages", Verbs: []string{"get", "list", "watch"}},                                    // metadata informer: which nodes a kruise-daemon serves (daemons.go)
	{Group: "", Resource: "events", Verbs: []string{"create", "patch", "list"}},                                                   // record.EventRecorder creates, then patches aggregated events; a new leader lists ours once
	{Group: "coordination.k8s.io", Resource: "leases", Verbs: []string{"get", "create", "update"}, Namespaced: true},              // leader election
}
