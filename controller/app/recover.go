package app

import (
	"context"
	"fmt"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/kube"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// An instance that stops records the events of its last actions within a
// bound (5 s after SIGTERM) and a crash records none; an action whose write
// succeeded at the API server while the client saw its context end records
// none either. The next leader finds that work done (a CRR of ours exists,
// AlreadyExists, or the image is already swapped) and acts no more, so
// without this the action would stay without its SidecarTerminating event.
// On taking the lead the controller notes the actions of earlier instances,
// waits past a stopping instance's flush, lists our SidecarTerminating
// events once, and records one for each noted action whose pod has none.
const (
	// eventSource is the component our events are recorded as.
	eventSource = "sidecar-terminator"
	// recoverWindow bounds which earlier actions are looked at: those of
	// the last minutes, well inside the API server's event TTL (1 h by
	// default), so that an event expired long ago is never recorded again.
	recoverWindow = 10 * time.Minute
	// recoverAfter is how long after taking the lead the events are listed:
	// longer than a stopping instance's event flush (events.shutdown's 5 s),
	// so an event still on its way is not recorded twice.
	recoverAfter = 10 * time.Second
)

// earlierAction is one action of an earlier instance that must have its event.
type earlierAction struct {
	pod     *corev1.Pod
	message string
}

// earlierActions lists, from the caches, the actions taken within the
// window before now: each pod's latest CRR of ours, and each sidecar whose
// image is already its quick-exit image (a swap: a sidecar that is given its
// quick-exit image from the start exits at once and is no use as a sidecar).
// A swap counts as recent while the sidecar has not terminated, or
// terminated within the window.
func earlierActions(pods []*corev1.Pod, crrsOf func(*corev1.Pod) []*kruisev1alpha1.ContainerRecreateRequest,
	policy decision.Policy, now time.Time) []earlierAction {
	var out []earlierAction
	for _, pod := range pods {
		var latest *kruisev1alpha1.ContainerRecreateRequest
		for _, c := range crrsOf(pod) {
			if latest == nil || c.CreationTimestamp.After(latest.CreationTimestamp.Time) {
				latest = c
			}
		}
		if latest != nil && now.Sub(latest.CreationTimestamp.Time) < recoverWindow {
			var names []string
			for _, c := range latest.Spec.Containers {
				names = append(names, c.Name)
			}
			out = append(out, earlierAction{pod: pod, message: fmt.Sprintf(
				"Stopping sidecars %v: ContainerRecreateRequest %s was created by an earlier instance of the controller, which stopped before recording this event; kruise-daemon stops them",
				names, latest.Name)})
			continue
		}
		containers, _ := decision.Classify(pod, policy)
		var swapped []string
		image := ""
		for _, c := range containers {
			if c.Role != decision.RoleSidecar || c.SwappedTo() == "" {
				continue
			}
			if c.State == decision.StateTerminated && now.Sub(c.FinishedAt) >= recoverWindow {
				continue
			}
			swapped, image = append(swapped, c.Name), c.Image
		}
		if len(swapped) > 0 {
			out = append(out, earlierAction{pod: pod, message: fmt.Sprintf(
				"Stopping sidecars %v: their image was swapped for the quick-exit image %s by an earlier instance of the controller, which stopped before recording this event",
				swapped, image)})
		}
	}
	return out
}

// podsWithEvent lists the UIDs of the pods that have a SidecarTerminating
// event of ours: one paginated LIST, filtered by the API server on reason and
// source.
func podsWithEvent(ctx context.Context, client kubernetes.Interface) (map[types.UID]bool, error) {
	sel := fields.Set{"reason": reconciler.ReasonTerminated, "source": eventSource}.AsSelector().String()
	seen := map[types.UID]bool{}
	opts := metav1.ListOptions{FieldSelector: sel, Limit: 500}
	for {
		list, err := client.CoreV1().Events("").List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list %s events: %w", reconciler.ReasonTerminated, err)
		}
		for _, e := range list.Items {
			seen[e.InvolvedObject.UID] = true
		}
		if list.Continue == "" {
			return seen, nil
		}
		opts.Continue = list.Continue
	}
}

// recoverEvents records the event of each earlier action whose pod has none.
// It returns how many it recorded.
func recoverEvents(ctx context.Context, client kubernetes.Interface, rec reconciler.Recorder, actions []earlierAction) (int, error) {
	if len(actions) == 0 {
		return 0, nil
	}
	seen, err := podsWithEvent(ctx, client)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, a := range actions {
		if seen[a.pod.UID] {
			continue
		}
		rec.Event(a.pod, corev1.EventTypeNormal, reconciler.ReasonTerminated, a.message)
		klog.FromContext(ctx).Info("Recorded the event of an earlier instance's action", "pod", klog.KObj(a.pod), "message", a.message)
		n++
	}
	return n, nil
}

// noteEarlierActions snapshots the earlier instances' actions from the
// synced caches (before this instance acts, so none of its own are among
// them) and, recoverAfter later, records the events they lack.
func noteEarlierActions(ctx context.Context, caches *kube.Caches, policy decision.Policy, client kubernetes.Interface, rec reconciler.Recorder) {
	var pods []*corev1.Pod
	for _, o := range caches.PodInformer.GetStore().List() {
		if p, ok := kube.CachedPod(o); ok {
			pods = append(pods, p)
		}
	}
	crrsOf := func(p *corev1.Pod) []*kruisev1alpha1.ContainerRecreateRequest {
		crrs, _ := caches.CRRs(p)
		return crrs
	}
	actions := earlierActions(pods, crrsOf, policy, time.Now())
	if len(actions) == 0 {
		return
	}
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(recoverAfter):
		}
		n, err := recoverEvents(ctx, client, rec, actions)
		if err != nil {
			// Visible, not fatal: the actions themselves are done.
			klog.FromContext(ctx).Error(err, "Could not check the events of earlier instances' actions")
			return
		}
		klog.FromContext(ctx).Info("Checked the events of earlier instances' actions", "actions", len(actions), "recorded", n)
	}()
}
