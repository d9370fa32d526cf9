// Package decision is the whole of sidecar-terminator's judgement, with no I/O.
//
// Decide takes the facts about one pod (the pod itself, its node, the
// ContainerRecreateRequests this controller made for it, whether the CRR API
// exists, and the time) and returns a Plan: how each container was classified,
// whether the pod's main containers are done, and which writes, if any, stop
// its sidecars. Everything that talks to the API server lives elsewhere, so the
// same function runs in the controller, in the simulator and in `explain`.
//
// The rules are those of ARCHITECTURE.md ("The behaviour"), with one
// refinement forced by the kubelet: a pod whose sidecar never started reports
// phase Pending even after its main containers have run, so a Pending pod is
// looked at once it is initialized (every regular container has a status and
// no init container is still to run).
package decision
