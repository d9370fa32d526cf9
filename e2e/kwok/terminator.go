package kwok

import (
	"context"
	"fmt"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// terminator is the running terminator of a run, if any.
type terminator struct {
	proc *cluster.Process
	pid  int
	stop func()
}

func (t *terminator) died() bool { return t.proc != nil && !t.proc.Alive() }

func (t *terminator) logTail() string {
	if t.proc == nil {
		return "no terminator"
	}
	return t.proc.Name + " log: " + t.proc.LogTail(2000)
}

// startTerminator starts cfg.Terminator against the kwok cluster: this
// controller as cluster.StartController runs it (its own ServiceAccount,
// --virtual-node-selector=type=virtual-kubelet, the quick-exit image's
// repository allowed), or kruise-manager with the SidecarTerminator gate
// as OpenKruise ships it otherwise (e2e/bench/kruise.go says what it
// needs; the kwok pods meet it: restartPolicy Never, Running, bound to
// existing Nodes labelled type=virtual-kubelet).
func startTerminator(ctx context.Context, k *cluster.KwokCluster, cfg Config) (*terminator, error) {
	switch cfg.Terminator {
	case Controller:
		if err := k.ApplyControllerRBAC(ctx, cfg.Root); err != nil {
			return nil, err
		}
		c := &cluster.Cluster{ControlPlane: k.ControlPlane}
		ctl, err := c.StartController(ctx, cfg.ControllerBin)
		if err != nil {
			return nil, err
		}
		return &terminator{proc: ctl.Process, pid: ctl.Process.PID, stop: func() { _ = ctl.Stop() }}, nil
	case Kruise:
		mgr, err := cluster.StartKruiseManager(ctx, k.ControlPlane, cluster.KruiseManagerOptions{SidecarTerminator: true})
		if err != nil {
			return nil, err
		}
		// Stopped with the control plane, which started it.
		return &terminator{proc: mgr, pid: mgr.PID, stop: func() {}}, nil
	case None:
		return &terminator{stop: func() {}}, nil
	}
	return nil, fmt.Errorf("unknown terminator %q (want %s, %s or %s)", cfg.Terminator, Controller, Kruise, None)
}
