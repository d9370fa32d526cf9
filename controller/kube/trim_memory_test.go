package kube

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// kubeletJobPod is a Job's pod as the API server sends it once its main has
// exited: what the kubelet, the Job controller and the scheduler wrote.
func kubeletJobPod(i int) *corev1.Pod {
	at := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	name := fmt.Sprintf("batch-%d-x7k2p", i)
	conds := []corev1.PodCondition{}
	for _, t := range []corev1.PodConditionType{"PodReadyToStartContainers", corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		conds = append(conds, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: at})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, GenerateName: fmt.Sprintf("batch-%d-", i), Namespace: "team-analytics",
			UID: types.UID(fmt.Sprintf("3f0c1d9e-4b2a-4c1e-9d7f-%012d", i)), ResourceVersion: fmt.Sprint(1000000 + i),
			Labels: map[string]string{"batch.kubernetes.io/job-name": fmt.Sprintf("batch-%d", i), "batch.kubernetes.io/controller-uid": "u"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: fmt.Sprintf("batch-%d", i),
				UID: types.UID(fmt.Sprintf("9a8b7c6d-0000-4000-8000-%012d", i)), Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, NodeName: "node-17.example.internal", TerminationGracePeriodSeconds: ptr.To[int64](30),
			Containers: []corev1.Container{
				{Name: "main", Image: "registry.example.com/analytics/batch-runner:2.14.3", Args: []string{"--shard", fmt.Sprint(i)}},
				{Name: "log-shipper", Image: "registry.example.com/platform/log-shipper:1.9.0",
					Env: []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: decision.EnvTerminate, Value: "true"}}},
			}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: conds, HostIP: "10.0.3.17", PodIP: "10.244.3.91",
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "main", Image: "registry.example.com/analytics/batch-runner:2.14.3", ImageID: "registry.example.com/analytics/batch-runner@sha256:0123",
					ContainerID: fmt.Sprintf("containerd://%064d", i), State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
						ExitCode: 0, Reason: "Completed", StartedAt: at, FinishedAt: at, ContainerID: fmt.Sprintf("containerd://%064d", i)}}},
				{Name: "log-shipper", Image: "registry.example.com/platform/log-shipper:1.9.0", ImageID: "registry.example.com/platform/log-shipper@sha256:4567",
					ContainerID: fmt.Sprintf("containerd://%064d", i+1), Ready: true, Started: ptr.To(true),
					State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}}},
			}},
	}
}

// retainedPerObject decodes each of wire and keeps what transform makes of
// it, rounds times, and gives the heap bytes and objects kept alive per
// object, measured after a GC on each side: what a cache grows by per
// object it holds.
func retainedPerObject(tb testing.TB, rounds int, wire [][]byte, decode func([]byte) (any, error), transform func(any) (any, error)) (bytes, objects float64) {
	kept := make([]any, len(wire))
	var before, after runtime.MemStats
	for range rounds {
		clear(kept)
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i, data := range wire {
			obj, err := decode(data)
			if err != nil {
				tb.Fatal(err)
			}
			kept[i], _ = transform(obj)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
	}
	if b, ok := tb.(*testing.B); ok {
		b.StopTimer()
	}
	runtime.KeepAlive(kept)
	n := float64(len(wire))
	return float64(after.HeapAlloc-before.HeapAlloc) / n, float64(after.HeapObjects-before.HeapObjects) / n
}
