// Package webhook serves the mutating admission webhook that converts the
// marked sidecars of opted-in Job-like pods to native sidecars (the plan is
// package native's), and keeps its serving certificate: generated, stored in
// a Secret, rotated, and its CA written into the
// MutatingWebhookConfiguration's caBundle; or read from files that
// cert-manager keeps, which then injects the caBundle itself.
//
// The webhook is registered with failurePolicy Ignore: any error here admits
// the pod unchanged, and the controller's kill path still stops its sidecars.
package webhook
