package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// Node names: the yardstick knows a virtual node by this prefix.
const (
	NormalNode        = "bench-normal"
	VirtualNodePrefix = "bench-virtual-"
	QuickExitImage    = "ghcr.io/sidecar-terminator/quick-exit:dev"
	Namespace         = "default"
	runLabel          = "bench-run"
	// terminatorLabel names, in a side-by-side run, the terminator a burst
	// pod is for.
	terminatorLabel = "bench-terminator"
)

// The terminators' names, in the results and on terminatorLabel.
const (
	controllerTerminator = "sidecar-terminator"
	yardstickTerminator  = "yardstick"
)

// sideBySidePod is the i-th pod of a burst the controller and the yardstick
// share (Config.SideBySide): the controller's (ownerOf 0) marked as jobPod
// marks it; the yardstick's with no mark, which the controller leaves
// alone, and each labelled with its terminator, so that the yardstick
// leaves the controller's alone.
func sideBySidePod(run string, i int) *corev1.Pod {
	p := jobPod(run, i, i%2 == 1)
	if ownerOf(i, 2) == 0 {
		p.Labels[terminatorLabel] = controllerTerminator
		return p
	}
	p.Labels[terminatorLabel] = yardstickTerminator
	p.Spec.Containers[1].Env = nil
	return p
}

// jobPod is a Job-type pod with a main container and a marked sidecar,
// running. Virtual-node pods carry the image mark, normal-node pods the CRR mark.
func jobPod(run string, i int, virtual bool) *corev1.Pod {
	node, env := NormalNode, corev1.EnvVar{Name: decision.EnvTerminate, Value: "true"}
	if virtual {
		node, env = fmt.Sprintf("%s%d", VirtualNodePrefix, i%2+1), corev1.EnvVar{Name: decision.EnvTerminateWithImage, Value: QuickExitImage}
	}
	return &corev1.Pod{
		// Named and owned as the Job controller makes its pods: the name by
		// the API server from generateName, and a controller reference to
		// a batch/v1 Job (no such Job exists and no garbage collector runs
		// here; the reference tells terminators the pod is a Job's, so the
		// controller skips the live read it makes before a CRR for a bare
		// pod, as it does for every real Job pod).
		ObjectMeta: metav1.ObjectMeta{GenerateName: run + "-", Namespace: Namespace, Labels: map[string]string{runLabel: run},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: run, UID: types.UID("bench-job-" + run), Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever, NodeName: node,
			Containers: []corev1.Container{
				{Name: "main", Image: "example.com/batch:1"},
				{Name: "sidecar", Image: "example.com/log-shipper:1", Env: []corev1.EnvVar{env}},
			},
		},
	}
}

// backgroundPod is a Deployment-style pod (restartPolicy Always): the
// controller's field selector keeps it out of its cache.
func backgroundPod(i int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("background-%06d", i), Namespace: Namespace,
			Labels: map[string]string{"app": "background"}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways, NodeName: NormalNode,
			Containers: []corev1.Container{{Name: "app", Image: "example.com/app:1"}}},
	}
}

func running(at time.Time) corev1.ContainerState {
	return corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at)}}
}

func terminated(at time.Time) corev1.ContainerState {
	return corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, FinishedAt: metav1.NewTime(at)}}
}

// setStatus writes the pod's status as a kubelet would: both containers with
// the given states, and the phase.
func setStatus(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, phase corev1.PodPhase, mainState, sidecarState corev1.ContainerState) (*corev1.Pod, error) {
	p := pod.DeepCopy()
	p.ResourceVersion = "" // unconditional, as a kubelet's status patch is
	p.Status.Phase = phase
	p.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "main", Image: p.Spec.Containers[0].Image, ContainerID: "containerd://" + p.Name + "-main", State: mainState},
		{Name: "sidecar", Image: p.Spec.Containers[1].Image, ContainerID: "containerd://" + p.Name + "-sidecar", State: sidecarState},
	}
	// Retry while the API server is away (a chaos run restarts it): a kubelet
	// keeps reporting too.
	var out *corev1.Pod
	var err error
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		out, err = cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{})
		var status apierrors.APIStatus
		transient := !errors.As(err, &status) || apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) ||
			apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err)
		if err == nil || !transient || ctx.Err() != nil || time.Now().After(deadline) {
			return out, err
		}
	}
}

// parallel runs fn(i) for i in [0, n) on the given number of goroutines and
// returns the first error.
func parallel(n, workers int, fn func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan int)
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}
