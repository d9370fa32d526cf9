// Package kruisetest is OpenKruise's side of this controller's CRR writes,
// as the client sees it: the answers of kruise's ContainerRecreateRequest
// webhook and of the API server around it, derived once from their source
// and used by the controller's tests and by the simulator alike.
//
// Sources (github.com/openkruise/kruise v1.9.1; k8s.io/apiserver v0.35.4):
//   - config/webhook/manifests.yaml: the CRR webhook is the mutating
//     "mcontainerrecreaterequest.kb.io", on CREATE and UPDATE, failurePolicy Fail;
//   - pkg/webhook/containerrecreaterequest/mutating/crr_mutating_handler.go:
//     what it refuses, with which HTTP code and message (Admit below);
//   - controller-runtime's admission.Errored sets only Code and Message, and
//     the API server's webhook/errors/statuserror.go ToStatusErr prefixes
//     `admission webhook "<name>" denied the request: ` (Denied below);
//   - apiserver admission/plugin/webhook/mutating/dispatcher.go: a webhook
//     that cannot be called under failurePolicy Fail is an InternalError (500)
//     "failed calling webhook" (WebhookDown below);
//   - a removed CRD: the API server's not-found handler answers a plain 404,
//     which client-go turns into a NotFound naming the resource (CRDGone).
package kruisetest

import (
	"fmt"
	"net/http"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// WebhookName is kruise's mutating webhook for CRRs.
const WebhookName = "mcontainerrecreaterequest.kb.io"

var crrResource = schema.GroupResource{Group: "apps.kruise.io", Resource: "containerrecreaterequests"}

// Denied is the webhook refusing a CRR with an HTTP code and its message.
func Denied(code int32, message string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code,
		Message: fmt.Sprintf("admission webhook %q denied the request: %s", WebhookName, message)}}
}

// FeatureGateOff is the answer to every CRR create while kruise-manager runs
// with the KruiseDaemon feature gate off (discovery still serves the API).
func FeatureGateOff() error {
	return Denied(http.StatusForbidden, "feature-gate KruiseDaemon is not enabled")
}

// WebhookDown is the API server's answer while kruise-manager (the webhook's
// server) is down: failurePolicy Fail refuses the create.
func WebhookDown() error {
	return apierrors.NewInternalError(fmt.Errorf(
		"failed calling webhook %q: failed to call webhook: Post \"https://kruise-webhook-service.kruise-system.svc:443/mutate-apps-kruise-io-v1alpha1-containerrecreaterequest?timeout=30s\": dial tcp 10.0.0.12:443: connect: connection refused",
		WebhookName))
}

// PodCacheLagging is the webhook's answer when its own pod cache does not
// yet show the target's container ID (a sidecar that just started): 400,
// although the controller's cache shows the container running.
func PodCacheLagging(container string) error {
	return Denied(http.StatusBadRequest, fmt.Sprintf("no containerID in %s containerStatus, maybe the container has not been initialized", container))
}

// CRDGone is the answer to a CRR create after OpenKruise's CRD was removed.
func CRDGone() error {
	return apierrors.NewGenericServerResponse(http.StatusNotFound, "post", crrResource, "", "404 page not found", 0, true)
}

// minDeadlineSeconds is kruise's (crr_mutating_handler.go); the controller
// validates --crr-deadline against the same figure.
var minDeadlineSeconds = int64(decision.MinCRRDeadline.Seconds())

// Admit is the webhook's CREATE path for a CRR: nil when kruise admits it,
// else the error the client sees. pod is the pod the CRR names (nil: none),
// nodeFound whether its node exists. The order of the checks is kruise's.
func Admit(crr *kruisev1alpha1.ContainerRecreateRequest, pod *corev1.Pod, nodeFound bool) error {
	bad := func(format string, args ...any) error {
		return Denied(http.StatusBadRequest, fmt.Sprintf(format, args...))
	}
	spec := crr.Spec
	if spec.PodName == "" {
		return bad("podName can not be empty")
	}
	if len(spec.Containers) == 0 {
		return bad("containers list can not be null")
	}
	if d := spec.ActiveDeadlineSeconds; d != nil && *d < minDeadlineSeconds {
		return bad("activeDeadlineSeconds can not be less than %ds", minDeadlineSeconds)
	}
	if s := spec.Strategy; s != nil {
		if s.TerminationGracePeriodSeconds != nil && *s.TerminationGracePeriodSeconds < 0 {
			return bad("terminationGracePeriodSeconds must be non-negative integer")
		}
		switch s.FailurePolicy {
		case "", kruisev1alpha1.ContainerRecreateRequestFailurePolicyFail, kruisev1alpha1.ContainerRecreateRequestFailurePolicyIgnore:
		default:
			return bad("unknown failurePolicy %s", s.FailurePolicy)
		}
	}
	if pod == nil {
		return bad("no found Pod named %s", spec.PodName)
	}
	// kubecontroller.IsPodActive: not Succeeded, not Failed, not being deleted;
	// a pod settled by a sidecar terminator (condition SidecarTerminated,
	// whatever its status) is admitted anyway.
	active := pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed && pod.DeletionTimestamp == nil
	if !active && !hasCondition(pod, decision.ConditionSidecarTerminated) {
		return bad("not allowed to recreate containers in an inactive Pod")
	} else if pod.Spec.NodeName == "" {
		return bad("not allowed to recreate containers in a pending Pod")
	}
	if !nodeFound {
		return bad("failed to get Node %s: nodes %q not found", pod.Spec.NodeName, pod.Spec.NodeName)
	}
	seen := map[string]bool{}
	for _, c := range spec.Containers {
		if seen[c.Name] {
			return bad("can not recreate %s multi times", c.Name)
		}
		seen[c.Name] = true
		if c.PreStop != nil || c.Ports != nil || c.StatusContext != nil {
			return bad("preStop, ports, statusContext in container are ready-only fields")
		}
		found := false
		for _, pc := range pod.Spec.Containers {
			found = found || pc.Name == c.Name
		}
		if !found {
			return bad("container %s not found in Pod", c.Name)
		}
		var status *corev1.ContainerStatus
		for i := range pod.Status.ContainerStatuses {
			if pod.Status.ContainerStatuses[i].Name == c.Name {
				status = &pod.Status.ContainerStatuses[i]
			}
		}
		if status == nil {
			return bad("not found %s containerStatus in Pod Status", c.Name)
		}
		if status.ContainerID == "" {
			return PodCacheLagging(c.Name)
		}
	}
	return nil
}

func hasCondition(pod *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return true
		}
	}
	return false
}
