// Package native decides, at admission, which marked sidecars of a Job-like
// pod become native sidecars: init containers with restartPolicy Always, which
// the kubelet itself stops once the main containers are done. It is pure (a
// pod and the nodes it may land on in, a plan out), shared by the admission
// webhook, explain and the simulator, and reads the marks through
// decision.Classify so they have one reader.
//
// A pod is converted only where the conversion is sure to be run: every node
// the pod can be scheduled to runs native sidecars, and no mark of the pod is
// in doubt. Anything else is left to the controller's kill path.
package native
