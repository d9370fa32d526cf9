// Package sim is the deterministic simulator: it drives the real
// reconciler.Reconciler.Sync and decision.Decide against an in-memory world,
// in virtual time, to show at scale and under faults that the controller
// never stops a sidecar early and never leaves a pod hanging when a path
// exists.
//
// One run is one scenario and one seed (New, Run). Everything happens on one
// goroutine: events sit in a heap ordered by virtual time and scheduling
// order; every random choice comes from one seeded *rand.Rand; the clock is a
// FakeClock the loop sets. Same seed and scenario, same trace, byte for byte
// (Result.Hash).
//
// The pieces, one file each:
//   - world.go, api.go, kruise.go: the API server's truth (pods, nodes, CRRs
//     with resourceVersions), JSON patches applied for real with test ops,
//     kruise's webhook, daemon and manager;
//   - cache.go, queue.go, controller.go: each controller instance's lagging
//     informer cache (reconciler.Reader), its workqueue, its writes
//     (reconciler.Writer), crashes and leader changes;
//   - nodes.go: kubelets and virtual nodes running the container-lifecycle
//     model of package sim/model;
//   - faults.go, scenario.go, scenarios.go, soak.go: the named knobs and the
//     scenario table;
//   - check.go: the invariants, checked as each step happens.
package sim
