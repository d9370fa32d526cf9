package kube

import (
	"strings"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// TrimPod keeps of a pod only what the decision, the patches and the events
// read, so that a cluster full of Job pods costs little memory: the pod
// cache holds it encoded (CachePod), and a live read of the pod is decided
// on as trimmed. Container order and count are kept: patches address
// containers by index.
//
// It trims the pod in place and returns it: its two callers own what they
// pass (the informer's transform may change the object it is given,
// client-go's TransformFunc; a live read's pod is the reader's own), and a
// copy cost the burst a ninth of the controller's allocations (e2e/bench's
// profile). A caller that keeps the whole pod passes a DeepCopy.
//
// The pod watch decodes only the fields read here (podwatch.go's
// keptPodFields): a field read here must be named there too, and
// TestThePodWatchDecodesWhatTheCacheKeepsAsClientGoDoes fails until it is.
func TrimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	meta := metav1.ObjectMeta{
		Name: pod.Name, GenerateName: pod.GenerateName, Namespace: pod.Namespace, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion, DeletionTimestamp: pod.DeletionTimestamp,
		Annotations: ourAnnotations(pod.Annotations), OwnerReferences: jobOwner(pod.OwnerReferences),
	}
	spec := corev1.PodSpec{RestartPolicy: pod.Spec.RestartPolicy, NodeName: pod.Spec.NodeName,
		TerminationGracePeriodSeconds: pod.Spec.TerminationGracePeriodSeconds,
		// The image too: the plan lists every container with its image, and
		// `explain` prints it. The container's restartPolicy and
		// restartPolicyRules decide whether the kubelet runs it again
		// (decision/restart.go): a main done by the pod's policy may not be
		// done by its own.
		InitContainers: trimContainers(pod.Spec.InitContainers, false),
		Containers:     trimContainers(pod.Spec.Containers, true),
	}
	status := corev1.PodStatus{
		Phase:                 pod.Status.Phase,
		ContainerStatuses:     trimStatuses(pod.Status.ContainerStatuses),
		InitContainerStatuses: trimStatuses(pod.Status.InitContainerStatuses),
		Conditions:            trimConditions(pod.Status.Conditions),
	}
	*pod = corev1.Pod{TypeMeta: podTypeMeta, ObjectMeta: meta, Spec: spec, Status: status}
	return pod, nil
}

// trimContainers trims each container in its place in the list: its name,
// image, restart policy and rules, and (env) the env the marks are read
// from.
func trimContainers(list []corev1.Container, env bool) []corev1.Container {
	for i := range list {
		c := &list[i]
		kept := corev1.Container{Name: c.Name, Image: capValue(c.Image), RestartPolicy: c.RestartPolicy, RestartPolicyRules: c.RestartPolicyRules}
		if env {
			kept.Env = ourEnv(c.Env)
		}
		*c = kept
	}
	return list
}

// trimConditions keeps each condition's type and status (the settle patch
// needs to know whether the list is empty, and addresses ours by index),
// and for ours when it was set.
func trimConditions(list []corev1.PodCondition) []corev1.PodCondition {
	for i := range list {
		c := &list[i]
		kept := corev1.PodCondition{Type: c.Type, Status: c.Status}
		if c.Type == decision.ConditionSidecarTerminated {
			kept.LastTransitionTime = c.LastTransitionTime
			if c.Message == decision.KruiseSettleMessage {
				// OpenKruise's own SidecarTerminator settled it
				// (decision/second.go); any other message is not kept.
				kept.Message = decision.KruiseSettleMessage
			}
		}
		*c = kept
	}
	return list
}

func ourAnnotations(in map[string]string) map[string]string {
	var out map[string]string
	for _, k := range []string{decision.AnnotationSidecars, decision.AnnotationQuickExitImage, decision.AnnotationCRRAttempts, decision.AnnotationCRRAPIGone, decision.AnnotationStopOrder, decision.AnnotationStopStage} {
		if v, ok := in[k]; ok {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = capValue(v)
		}
	}
	for k := range in {
		if decision.NearMissAnnotation(k) != "" {
			// The key alone, for the near-miss Warning; its value is not read.
			if out == nil {
				out = map[string]string{}
			}
			out[k] = ""
		}
	}
	return out
}

// capValue keeps at most decision.MaxValueLen+1 bytes of a value read from
// the pod: enough for the decision to see it is too long (and invalid),
// never so much that a namespace of hostile pods fills the cache. The cut
// is copied so the decoded object's full string is not kept alive by it.
func capValue(v string) string {
	if !decision.TooLong(v) {
		return v
	}
	return strings.Clone(v[:decision.MaxValueLen+1])
}

func ourEnv(in []corev1.EnvVar) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, e := range in {
		switch e.Name {
		case decision.EnvTerminate, decision.EnvTerminateWithImage, decision.EnvIgnoreExitCode:
			e.Value = capValue(e.Value)
			out = append(out, e)
		default:
			if decision.NearMissEnv(e.Name) != "" {
				// The name alone, for the near-miss Warning.
				out = append(out, corev1.EnvVar{Name: e.Name})
			}
		}
	}
	return out
}

func trimStatuses(list []corev1.ContainerStatus) []corev1.ContainerStatus {
	for i := range list {
		s := &list[i]
		kept := corev1.ContainerStatus{Name: s.Name, State: s.State, RestartCount: s.RestartCount,
			ContainerID: s.ContainerID, Image: capValue(s.Image)}
		if w := kept.State.Waiting; w != nil {
			// The kubelet's message quotes the image, which the pod's
			// author chose; nothing reads it.
			*w = corev1.ContainerStateWaiting{Reason: capValue(w.Reason)}
		}
		if t := s.LastTerminationState.Terminated; t != nil {
			*t = corev1.ContainerStateTerminated{ExitCode: t.ExitCode, FinishedAt: t.FinishedAt}
			kept.LastTerminationState.Terminated = t
		}
		if t := kept.State.Terminated; t != nil {
			reason := ""
			if t.Reason == decision.RestartingAllContainersReason {
				// The kubelet stopped it to restart the whole pod in place.
				reason = decision.RestartingAllContainersReason
			}
			*t = corev1.ContainerStateTerminated{ExitCode: t.ExitCode, StartedAt: t.StartedAt, FinishedAt: t.FinishedAt, ContainerID: t.ContainerID, Reason: reason}
		}
		*s = kept
	}
	return list
}

// TrimNode is the node informer's transform: of a node, only what its
// platform is known from (decision.PlatformOf), so a cache of thousands of
// nodes holds their labels and two strings each, not their images,
// conditions and addresses.
func TrimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion, Labels: n.Labels}}
	out.Spec.ProviderID = bounded(n.Spec.ProviderID)
	out.Status.NodeInfo.KubeletVersion = bounded(n.Status.NodeInfo.KubeletVersion)
	return out, nil
}

// NodeFacts are the decision's facts of a (trimmed) node.
func NodeFacts(n *corev1.Node) decision.NodeFacts {
	return decision.NodeFacts{Name: n.Name, Labels: n.Labels, KubeletVersion: n.Status.NodeInfo.KubeletVersion, ProviderID: n.Spec.ProviderID}
}

// maxNodeString bounds the two strings kept of a node: a kubeletVersion or
// providerID is short, and one that is not says nothing more past this.
const maxNodeString = 256

func bounded(s string) string {
	if len(s) > maxNodeString {
		return s[:maxNodeString]
	}
	return s
}

// TrimCRR is the CRR informer's transform: of our CRRs, only what the
// reconciler reads from the cache (crrFacts, the echo and update filters,
// the index by pod UID, the expectations and the recovery of an earlier
// instance's actions): name, resourceVersion and creation time; our four
// labels; the pod's name, the containers with their restart count and the
// deadline; the status but each container's message. A burst's CRRs are
// thousands at once (10,000 in the scale tier's), and kruise's webhook and
// daemon add labels, a strategy and container IDs that nothing here reads.
// What is read live (CheckExistingCRR, OpenKruise's own CRR) is whole.
// The cache holds it as a cachedCRR; CachedCRR reads it back.
func TrimCRR(obj any) (any, error) {
	c, ok := obj.(*kruisev1alpha1.ContainerRecreateRequest)
	if !ok {
		return StripManagedFields(obj)
	}
	return cacheCRR(c), nil
}

// StripManagedFields is the CRR informers' transform: server-side
// apply's field ownership is most of a node's metadata and of a CRR, and
// nothing here reads it.
func StripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// isController is the one Controller pointer of the cached pods' owner
// references (the cache's objects are never written).
var isController = func() *bool { t := true; return &t }()

// jobOwner keeps only the pod's controlling Job reference, if any (one, so
// bounded): decision.JobOwned reads it to skip the live read before a CRR.
func jobOwner(refs []metav1.OwnerReference) []metav1.OwnerReference {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller && r.Kind == "Job" && r.APIVersion == "batch/v1" {
			// The constants, not the decoded copies: every pod's are the same.
			return []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: r.Name, UID: r.UID, Controller: isController}}
		}
	}
	return nil
}
