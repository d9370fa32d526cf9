package apiserver

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

var leaderArgs = []string{"--leader-elect=true", "--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"}

// TestTwoReplicasOneActsAndTheOtherTakesOver runs two replicas with leader
// election: both become ready, one pod gets one CRR; the leader is killed
// with SIGKILL, and the standby takes over and stops the next pod's sidecar.
func TestTwoReplicasOneActsAndTheOtherTakesOver(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, true, leaderArgs...)
	second, err := (&cluster.Cluster{ControlPlane: e.cp}).StartController(ctx, e.bin, leaderArgs...)
	if err != nil {
		t.Fatalf("second replica: %v", err)
	}
	t.Cleanup(func() { _ = second.Stop() })
	e.createNode(t, ctx, "normal-1", nil)

	first := e.createPod(t, ctx, jobPod("before-failover", "normal-1", true, envCRR))
	crrs := e.kruise.AppsV1alpha1().ContainerRecreateRequests("default")
	waitUntil(t, ctx, "the CRR of the first pod", func(ctx context.Context) (bool, error) {
		_, err := crrs.Get(ctx, decision.CRRName(first, 1), metav1.GetOptions{})
		return err == nil, nil
	})
	lease, err := e.kube.CoordinationV1().Leases(cluster.ControllerNamespace).Get(ctx, cluster.ControllerName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holder := *lease.Spec.HolderIdentity
	leader, standby := e.ctl, second
	if strings.HasSuffix(holder, "_"+strconv.Itoa(second.Process.PID)) {
		leader, standby = second, e.ctl
	}
	if err := syscall.Kill(leader.Process.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	next := e.createPod(t, ctx, jobPod("after-failover", "normal-1", true, envCRR))
	waitUntil(t, ctx, "the standby to stop the next pod's sidecar", func(ctx context.Context) (bool, error) {
		_, err := crrs.Get(ctx, decision.CRRName(next, 1), metav1.GetOptions{})
		return err == nil, nil
	})
	list, err := crrs.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Errorf("want one CRR per pod (2), got %d", len(list.Items))
	}
	if n, _ := standby.Metric(ctx, `sidecar_terminator_actions_total{method="ContainerRecreateRequest",result="success"}`); n != 1 {
		t.Errorf("the new leader made %v CRRs, want 1 (the old leader made the first)", n)
	}
}
