package decision_test

import (
	"testing"

	. "github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// A pod is restarting all its containers when a container's status says it
// was stopped for that restart; a container the kubelet reports no status
// for yet does not count either way.
func TestRestartingAllContainersFromAContainersStatus(t *testing.T) {
	restarting := podtest.Pod("p").Container("main", podtest.Exited(137, podtest.Epoch)).Container("log", markCRR, podtest.Running()).Build()
	restarting.Status.ContainerStatuses[0].State.Terminated.Reason = RestartingAllContainersReason
	plain := podtest.Pod("p").Container("main", exited(0)).Container("log", markCRR, podtest.NoStatus()).Build()
	if !RestartingAllContainers(restarting) {
		t.Errorf("a main stopped for the restart: not restarting")
	}
	if RestartingAllContainers(plain) {
		t.Errorf("a main exited 0 beside a sidecar without status: restarting")
	}
}
