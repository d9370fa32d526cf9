// Package kube connects the reconciler to a real API server: informer caches
// behind the reconciler's Reader (pods field-selected on restartPolicy and
// trimmed to what the decision reads, node metadata only, and only the
// ContainerRecreateRequests this controller made), API calls behind its
// Writer, and the workqueue and workers that call Sync.
package kube
