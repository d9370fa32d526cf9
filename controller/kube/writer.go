package kube

import (
	"context"
	"encoding/json"
	"fmt"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruiseclient "github.com/openkruise/kruise-api/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// FieldManager names this controller in managedFields and audit logs.
const FieldManager = "sidecar-terminator"

// The CRR version. This controller reads, watches and writes
// apps.kruise.io/v1alpha1 ContainerRecreateRequests (kruise-api v1.8.0),
// which every OpenKruise release serves. OpenKruise's main branch
// (openkruise/kruise 22b250ac0, "promote ContainerRecreateRequest API from
// v1alpha1 to v1beta1") stores v1beta1 and keeps v1alpha1 served:
// config/crd/bases/apps.kruise.io_containerrecreaterequests.yaml marks
// v1alpha1 `served: true, storage: false` and v1beta1 `storage: true`, and
// config/crd/patches/webhook_in_containerrecreaterequests.yaml sets the CRD's
// conversion strategy to kruise-manager's /convert webhook, which runs
// apis/apps/v1alpha1/containerrecreaterequest_conversion.go (ConvertTo and
// ConvertFrom through the v1beta1 hub). The API server converts every
// request and watch event to the version asked for, so what this controller
// writes is stored as v1beta1 and what kruise-daemon writes back is read as
// v1alpha1. The fields used here (containers by name, strategy
// terminationGracePeriodSeconds and failurePolicy, activeDeadlineSeconds,
// ttlSecondsAfterFinished, status phase and containerRecreateStates) exist in
// both versions and round-trip; the annotations v1beta1 promotes into status
// fields are kruise-daemon's own, never read here. A release that stops
// serving v1alpha1 would show as the CRR API gone (crrapi.go): the controller
// falls back to the image swap and says so, never a wrong kill.

// Writer implements reconciler.Writer with API calls.
type Writer struct {
	Client kubernetes.Interface
	Kruise kruiseclient.Interface
}

// CreateCRR, with readPodFirst, reads the pod live first: the cache may still
// show a pod that was replaced by another of the same name, and kruise would
// act on the new one. The read narrows that window from the cache's lag to
// one round trip; what is left is closed by the CRR's owner reference, which
// lets the garbage collector delete a CRR whose pod is gone. Pods whose name
// the API server generated (every Job's) are not read: no later pod takes
// their name, and the read would double the requests of a burst.
func (w Writer) CreateCRR(ctx context.Context, crr *kruisev1alpha1.ContainerRecreateRequest, readPodFirst bool) error {
	if readPodFirst {
		pod, err := w.Client.CoreV1().Pods(crr.Namespace).Get(ctx, crr.Spec.PodName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(crr.OwnerReferences) == 0 || pod.UID != crr.OwnerReferences[0].UID {
			return apierrors.NewConflict(kruisev1alpha1.Resource("containerrecreaterequests"), crr.Name,
				fmt.Errorf("pod %s/%s is now a different pod (UID %s)", pod.Namespace, pod.Name, pod.UID))
		}
	}
	crrs := w.Kruise.AppsV1alpha1().ContainerRecreateRequests(crr.Namespace)
	opts := metav1.CreateOptions{FieldManager: FieldManager}
	var err error
	if rc := restClient(w.Kruise.AppsV1alpha1().RESTClient()); rc != nil {
		err = createCRR(ctx, rc, crr, opts.FieldManager)
	} else {
		_, err = crrs.Create(ctx, crr, opts)
	}
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	// Ours from an earlier sync or run means done; anyone else's under our
	// name is not taken for it (reconciler.CheckExistingCRR).
	existing, getErr := crrs.Get(ctx, crr.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(getErr) {
		// Deleted since (kruise's TTL): decide again on fresh state.
		return apierrors.NewConflict(kruisev1alpha1.Resource("containerrecreaterequests"), crr.Name, getErr)
	}
	if getErr != nil {
		return getErr
	}
	if foreign := reconciler.CheckExistingCRR(existing, crr); foreign != nil {
		return foreign
	}
	return err
}

func (w Writer) DeleteCRR(ctx context.Context, namespace, name string) error {
	err := w.Kruise.AppsV1alpha1().ContainerRecreateRequests(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (w Writer) PatchPod(ctx context.Context, namespace, name string, patch []byte) error {
	return w.patchPod(ctx, namespace, name, types.JSONPatchType, patch, "")
}

func (w Writer) PatchPodStatus(ctx context.Context, namespace, name string, patch []byte) error {
	return w.patchPod(ctx, namespace, name, types.JSONPatchType, patch, "status")
}

// patchPod sends a pod patch without decoding the answer (replyless.go).
func (w Writer) patchPod(ctx context.Context, namespace, name string, pt types.PatchType, patch []byte, subresource string) error {
	opts := metav1.PatchOptions{FieldManager: FieldManager}
	if rc := restClient(w.Client.CoreV1().RESTClient()); rc != nil {
		return patchPod(ctx, rc, namespace, name, pt, patch, opts.FieldManager, subresource)
	}
	var sub []string
	if subresource != "" {
		sub = []string{subresource}
	}
	_, err := w.Client.CoreV1().Pods(namespace).Patch(ctx, name, pt, patch, opts, sub...)
	return err
}

var _ reconciler.Writer = Writer{}

// AnnotatePod sets one annotation with a merge patch; the UID in the patch is
// a precondition: the API server refuses to change it on another pod.
func (w Writer) AnnotatePod(ctx context.Context, namespace, name string, uid types.UID, key, value string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"uid": uid, "annotations": map[string]string{key: value}}})
	if err != nil {
		return err
	}
	return w.patchPod(ctx, namespace, name, types.MergePatchType, patch, "")
}

// LivePod implements reconciler.LiveChecker. The pod is trimmed as the
// cache's are, so the decision reads the same fields, bounded the same way.
func (w Writer) LivePod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	pod, err := w.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	trimmed, err := TrimPod(pod)
	if err != nil {
		return nil, err
	}
	return trimmed.(*corev1.Pod), nil
}

// LiveCRR implements reconciler.LiveChecker.
func (w Writer) LiveCRR(ctx context.Context, namespace, name string) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	return w.Kruise.AppsV1alpha1().ContainerRecreateRequests(namespace).Get(ctx, name, metav1.GetOptions{})
}

// The Writer is also the sync's live reader: reconciler.New takes it as
// such (app/run.go).
var _ reconciler.LiveReader = Writer{}
