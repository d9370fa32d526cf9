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
// server. It depends on nothing else under sim/.
package model
