package podtest

import (
	"context"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	"k8s.io/apimachinery/pkg/types"
)

// NopWriter is a reconciler.Writer whose writes all succeed and change
// nothing, for tests that measure or wrap the writes rather than their effect.
type NopWriter struct{}

func (NopWriter) CreateCRR(context.Context, *kruisev1alpha1.ContainerRecreateRequest, bool) error {
	return nil
}
func (NopWriter) DeleteCRR(context.Context, string, string) error              { return nil }
func (NopWriter) PatchPod(context.Context, string, string, []byte) error       { return nil }
func (NopWriter) PatchPodStatus(context.Context, string, string, []byte) error { return nil }
func (NopWriter) AnnotatePod(context.Context, string, string, types.UID, string, string) error {
	return nil
}
