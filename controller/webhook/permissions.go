package webhook

// Permission is one API permission the webhook needs beyond the
// controller's own (controller/kube/permissions.go), with a self-managed
// certificate; with cert-manager it needs none. The chart grants exactly
// these, by name where the verb allows it (controller/deploy tests it).
type Permission struct {
	Group, Resource string
	Verbs           []string
	// Named permissions are granted on the one object only; Namespaced ones
	// in the controller's namespace only.
	Named, Namespaced bool
}

// Permissions lists every call Keeper makes.
var Permissions = []Permission{
	{Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations", Verbs: []string{"get", "update"}, Named: true}, // PatchCABundle
	{Group: "", Resource: "secrets", Verbs: []string{"get", "update"}, Named: true, Namespaced: true},                                 // the certificate's Secret
	{Group: "", Resource: "secrets", Verbs: []string{"create"}, Namespaced: true},                                                     // its first writing: create takes no name
}
