package cases

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// WatchedRun is a Job run to its end with every version of its
// namespace's pods seen on the way: what the checks of ordering (no swap
// before the main is done) and of passing states (ErrImagePull, a failed
// run of a restarted main) need, which the last state alone cannot show.
type WatchedRun struct {
	// Job as it was when it finished.
	Job *batchv1.Job
	// CRRs are every controller CRR seen in the namespace while the Job
	// ran, by name, with the containers each named.
	CRRs map[string][]string

	mu       sync.Mutex
	versions []*corev1.Pod
}

// RunWatched opens a watch on the pods of job's namespace, creates the
// Job and polls until it is Complete or Failed (or timeout), listing the
// controller's CRRs on each poll. It does not wait for the pods to settle
// beyond the Job's condition (RunToEnd does): a pod whose phase the
// controller settled may keep a container running on a virtual node.
func RunWatched(ctx context.Context, cl Clients, job *batchv1.Job, timeout time.Duration) (*WatchedRun, error) {
	ns := job.Namespace
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := cl.Kube.CoreV1().Pods(ns).Watch(wctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("watch pods in %s: %w", ns, err)
	}
	run := &WatchedRun{CRRs: map[string][]string{}}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				run.add(p)
			}
		}
	}()
	if _, err := cl.Kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("create job %s: %w", job.Name, err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		crrs, err := cl.Dynamic.Resource(CRRResource).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: ManagedByLabel})
		switch {
		case apierrors.IsNotFound(err):
			// No CRR API (a cluster without OpenKruise): no CRR can exist.
			crrs = &unstructured.UnstructuredList{}
		case err != nil:
			return false, fmt.Errorf("list CRRs in %s: %w", ns, err)
		}
		for _, c := range crrs.Items {
			run.CRRs[c.GetName()] = CRRContainers(c)
		}
		j, err := cl.Kube.BatchV1().Jobs(ns).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		run.Job = j
		return JobFinished(j) != "", nil
	})
	// The watch may lag: the pods as listed now are their last versions.
	if list, lerr := cl.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); lerr == nil {
		for i := range list.Items {
			run.add(&list.Items[i])
		}
	}
	if err != nil {
		return nil, fmt.Errorf("job %s/%s did not finish: %w\n%s", ns, job.Name, err, run.Describe())
	}
	return run, nil
}

func (r *WatchedRun) add(p *corev1.Pod) {
	r.mu.Lock()
	r.versions = append(r.versions, p)
	r.mu.Unlock()
}

// Versions returns every pod version seen, in the order seen.
func (r *WatchedRun) Versions() []*corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*corev1.Pod(nil), r.versions...)
}

// Pods returns the newest version seen of each pod, by name. The watch and
// the final list may deliver out of order: resourceVersions decide.
func (r *WatchedRun) Pods() map[string]*corev1.Pod {
	out := map[string]*corev1.Pod{}
	for _, p := range r.Versions() {
		if old, ok := out[p.Name]; !ok || resourceVersion(p) >= resourceVersion(old) {
			out[p.Name] = p
		}
	}
	return out
}

// OnlyPod returns the Job's one pod, failing t if there were others.
func (r *WatchedRun) OnlyPod(t *testing.T) *corev1.Pod {
	t.Helper()
	pods := r.Pods()
	if len(pods) != 1 {
		t.Fatalf("want one pod, saw %d:\n%s", len(pods), r.Describe())
	}
	for _, p := range pods {
		return p
	}
	return nil
}

// SawTerminated: some version showed container terminated with code.
func (r *WatchedRun) SawTerminated(container string, code int32) bool {
	return r.sawState(container, func(s corev1.ContainerState) bool {
		return s.Terminated != nil && s.Terminated.ExitCode == code
	})
}

// SawWaiting: some version showed container waiting with reason.
func (r *WatchedRun) SawWaiting(container, reason string) bool {
	return r.sawState(container, func(s corev1.ContainerState) bool {
		return s.Waiting != nil && s.Waiting.Reason == reason
	})
}

func (r *WatchedRun) sawState(container string, match func(corev1.ContainerState) bool) bool {
	for _, p := range r.Versions() {
		if s, ok := ContainerState(p, container); ok && match(s.State) {
			return true
		}
	}
	return false
}

// CheckSwapOnlyAfterMainDone: every pod version whose sidecar carries the
// image swapped shows main terminated with mainExit for good. Status only
// moves forward, so a swap issued earlier would show in some version.
func (r *WatchedRun) CheckSwapOnlyAfterMainDone(t *testing.T, sidecar, swapped, main string, mainExit int32) {
	t.Helper()
	for _, p := range r.Versions() {
		if ContainerImage(p, sidecar) != swapped {
			continue
		}
		if code, ok := ExitCode(p, main); !ok || code != mainExit {
			s, _ := ContainerState(p, main)
			t.Errorf("pod %s (rv %s) has the swapped image while %s is %+v", p.Name, p.ResourceVersion, main, s)
			return
		}
	}
}

// Describe is the last state of each pod, for failure messages.
func (r *WatchedRun) Describe() string {
	pods := r.Pods()
	names := make([]string, 0, len(pods))
	for name := range pods {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, name := range names {
		p := pods[name]
		fmt.Fprintf(&b, "%s on %s: %s", name, p.Spec.NodeName, p.Status.Phase)
		for _, c := range p.Status.ContainerStatuses {
			fmt.Fprintf(&b, " %s[%s restarts=%d %s]", c.Name, ContainerImage(p, c.Name), c.RestartCount, stateString(c.State))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func stateString(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Terminated != nil:
		return fmt.Sprintf("terminated(%d)", s.Terminated.ExitCode)
	case s.Waiting != nil:
		return "waiting(" + s.Waiting.Reason + ")"
	}
	return "none"
}

func resourceVersion(p *corev1.Pod) uint64 {
	n, _ := strconv.ParseUint(p.ResourceVersion, 10, 64)
	return n
}

// ContainerImage is the image the pod's spec names for the regular
// container name, "" if there is none.
func ContainerImage(p *corev1.Pod, name string) string {
	for _, c := range p.Spec.Containers {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}

// WaitForPodEvent waits up to timeout for an event of eventType and reason
// on pod (by UID: a pod of the same name before it does not count).
func WaitForPodEvent(ctx context.Context, cs kubernetes.Interface, pod *corev1.Pod, eventType, reason string, timeout time.Duration) error {
	var seen []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		l, err := cs.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(pod.UID)).String()})
		if err != nil {
			return false, nil
		}
		seen = seen[:0]
		for _, e := range l.Items {
			if e.Type == eventType && e.Reason == reason {
				return true, nil
			}
			seen = append(seen, e.Type+" "+e.Reason)
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("no %s %s event on pod %s/%s after %s (saw %v): %w", eventType, reason, pod.Namespace, pod.Name, timeout, seen, err)
	}
	return nil
}
