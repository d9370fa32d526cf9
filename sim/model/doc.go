// Package model is the container lifecycle of one pod as a kubelet plays it:
// containers that pull, start, run for a scripted time and exit with a
// scripted code, restart rules (Never, OnFailure, and Always for native
// sidecars), init containers in order, SIGTERM handled or ignored within the
// grace period, an image change that restarts a container under any restart
// policy, and the pod phase computed as the kubelet's getPhase does.
//
// It is pure: no clock, no randomness, no goroutines, no I/O. Time comes in as
// an argument and every transition is data (when, what), so the simulator and
// the virtual-kubelet mock node run the very same lifecycle, one in virtual
// time against an in-memory world, the other in real time against an API
// server. It depends on nothing else under sim/; what a container does comes
// from the workload image's argv (images/workload/spec), read in
// ParseBehaviour only.
//
// A node plays a pod like this (the mock node's provider maps onto it
// directly: CreatePod → NewPod, UpdatePod → SetImage per container,
// DeletePod → Delete, GetPodStatus → Status):
//
//	p, err := model.NewPod(pod, cfg)     // nothing runs yet
//	p.Advance(now)                        // apply what is due, react like a kubelet
//	if p.Version() != published { publish(p.Status()) }
//	wakeAt := p.NextWake()                // call Advance again then (zero: nothing scheduled)
//	p.SetImage("proxy", quickExit, now)   // the spec's image changed: restart the container
//	p.Stop("proxy", now)                  // kruise-daemon's CRR: SIGTERM, SIGKILL after grace
//	p.Delete(now); p.Gone()               // graceful deletion
//
// A Pod is not safe for concurrent use: the caller serialises calls, as the
// simulator's single loop does and a provider's lock would.
package model
