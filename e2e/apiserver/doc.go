// Package apiserver holds the tests that run the real controller binary
// against a real kube-apiserver (etcd + kube-apiserver only, no kubelet): the
// test plays the kubelet by writing container statuses, and checks the
// controller's writes as the API server recorded them.
package apiserver
