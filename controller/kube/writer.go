package kube

import (
	"context"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruiseclient "github.com/openkruise/kruise-api/client/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// FieldManager names this controller in managedFields and audit logs.
const FieldManager = "sidecar-terminator"

// Writer implements reconciler.Writer with API calls.
type Writer struct {
	Client kubernetes.Interface
	Kruise kruiseclient.Interface
}

func (w Writer) CreateCRR(ctx context.Context, crr *kruisev1alpha1.ContainerRecreateRequest) error {
	_, err := w.Kruise.AppsV1alpha1().ContainerRecreateRequests(crr.Namespace).Create(ctx, crr, metav1.CreateOptions{FieldManager: FieldManager})
	return err
}

func (w Writer) PatchPod(ctx context.Context, namespace, name string, patch []byte) error {
	_, err := w.Client.CoreV1().Pods(namespace).Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
	return err
}

func (w Writer) PatchPodStatus(ctx context.Context, namespace, name string, patch []byte) error {
	_, err := w.Client.CoreV1().Pods(namespace).Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}, "status")
	return err
}

var _ reconciler.Writer = Writer{}
