// Package reconciler is the sync step of sidecar-terminator: for one pod key
// it observes the pod, its node and its ContainerRecreateRequests through a
// Reader and its own memory, asks package decision for a plan, reads live
// what the plan says it assumed (then decides once more), carries the plan
// out through a Writer, and absorbs the answers into its memory, with an
// Event, a log line and metrics for every decision and write (Sync in
// reconciler.go lists the steps and their files).
//
// It holds no informers and starts no goroutines: the controller's workers
// call Sync, and so does the simulator, synchronously, with its in-memory world
// behind the same Reader and Writer.
//
// Expectations stop a lagging cache from causing a second write: a write the
// API server accepted is remembered, and until the cache shows its effect (the
// CRR listed, the image in the spec, the condition in the status) or a timeout
// passes, the pod is not decided again; past the timeout the plan asks the API
// server whether the write took effect. Deterministic CRR names and JSON-patch
// test operations make the write itself safe to repeat after a restart, when
// expectations are gone.
package reconciler
