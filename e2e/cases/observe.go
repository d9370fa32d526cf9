package cases

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// What the controller writes, by contract.
const (
	ManagedByLabel           = "sidecar-terminator.io/managed-by=sidecar-terminator"
	ReasonSidecarTerminating = "SidecarTerminating"
)

// CRRResource is OpenKruise's ContainerRecreateRequest.
var CRRResource = schema.GroupVersionResource{Group: "apps.kruise.io", Version: "v1alpha1", Resource: "containerrecreaterequests"}

// JobPods lists the pods the Job controller created for job.
func JobPods(ctx context.Context, cs kubernetes.Interface, ns, job string) ([]corev1.Pod, error) {
	l, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: batchv1.JobNameLabel + "=" + job})
	if err != nil {
		return nil, fmt.Errorf("list pods of job %s/%s: %w", ns, job, err)
	}
	return l.Items, nil
}

// JobFinished returns "Complete" or "Failed" once the Job has that
// condition true, else "".
func JobFinished(j *batchv1.Job) batchv1.JobConditionType {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.Type
		}
	}
	return ""
}

// ContainerState returns the status of the regular container name.
func ContainerState(p *corev1.Pod, name string) (corev1.ContainerStatus, bool) {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == name {
			return s, true
		}
	}
	return corev1.ContainerStatus{}, false
}

// ExitCode returns the container's exit code once it has terminated (the
// last termination if it was restarted and now waits or runs again).
func ExitCode(p *corev1.Pod, name string) (int32, bool) {
	s, ok := ContainerState(p, name)
	if !ok {
		return 0, false
	}
	if t := s.State.Terminated; t != nil {
		return t.ExitCode, true
	}
	return 0, false
}

// CRRsForPod lists the controller's ContainerRecreateRequests for pod.
func CRRsForPod(ctx context.Context, dyn dynamic.Interface, ns, pod string) ([]unstructured.Unstructured, error) {
	l, err := dyn.Resource(CRRResource).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: ManagedByLabel})
	if err != nil {
		return nil, fmt.Errorf("list CRRs in %s: %w", ns, err)
	}
	var out []unstructured.Unstructured
	for _, c := range l.Items {
		if p, _, _ := unstructured.NestedString(c.Object, "spec", "podName"); p == pod {
			out = append(out, c)
		}
	}
	return out, nil
}

// CRRContainers names the containers a CRR targets.
func CRRContainers(crr unstructured.Unstructured) []string {
	cs, _, _ := unstructured.NestedSlice(crr.Object, "spec", "containers")
	var names []string
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok {
			if n, ok := m["name"].(string); ok {
				names = append(names, n)
			}
		}
	}
	return names
}

// PodEvents lists events about pod with the given reason.
func PodEvents(ctx context.Context, cs kubernetes.Interface, ns, pod, reason string) ([]corev1.Event, error) {
	l, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + pod + ",reason=" + reason,
	})
	if err != nil {
		return nil, fmt.Errorf("list events of %s/%s: %w", ns, pod, err)
	}
	return l.Items, nil
}
