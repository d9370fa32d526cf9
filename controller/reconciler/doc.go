// Package reconciler is the sync step of sidecar-terminator: for one pod key
// it reads the pod, its node and its ContainerRecreateRequests through a
// Reader, asks package decision for a plan, and carries the plan out through
// a Writer, with an Event, a log line and metrics for every decision.
//
// It holds no informers and starts no goroutines: the controller's workers
// call Sync, and so does the simulator, synchronously, with its in-memory world
// behind the same Reader and Writer.
//
// Expectations stop a lagging cache from causing a second write: a write is
// remembered before it is sent, and until the cache shows its effect (the CRR
// listed, the image in the spec, the condition in the status) or a timeout
// passes, the pod is not decided again. Deterministic CRR names and JSON-patch
// test operations make the write itself safe to repeat after a restart, when
// expectations are gone.
package reconciler
