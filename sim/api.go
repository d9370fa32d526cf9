package sim

import (
	"k8s.io/apimachinery/pkg/types"

	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// Methods, as the report counts them.
const (
	MethodCRR    = "crr"
	MethodSwap   = "swap"
	MethodSettle = "settle"
	// MethodAnnotate follows a settle: it wakes the kubelet.
	MethodAnnotate = "annotate"
	// MethodDeleteCRR removes an earlier stop-order stage's CRR.
	MethodDeleteCRR = "delete-crr"
)

// apiWriter is the controller's API client: reconciler.Writer against the
// world, with the scenario's write faults.
type apiWriter struct {
	s *Sim
	c *controller
}

var _ reconciler.Writer = (*apiWriter)(nil)

func (w *apiWriter) CreateCRR(_ context.Context, crr *kruisev1alpha1.ContainerRecreateRequest, readPodFirst bool) error {
	s := w.s
	var names []string
	for _, c := range crr.Spec.Containers {
		names = append(names, c.Name)
	}
	return w.write(MethodCRR, crr.Spec.PodName, fmt.Sprintf("%s %v", crr.Name, names), func() error {
		// As the controller's kube.Writer: when asked, the pod is read live
		// and a CRR for a pod replaced under the same name is refused.
		e := s.world.pods[cache.ObjectName{Namespace: crr.Namespace, Name: crr.Spec.PodName}]
		if readPodFirst && e != nil && (len(crr.OwnerReferences) == 0 || e.obj.UID != crr.OwnerReferences[0].UID) {
			return apierrors.NewConflict(crrResource, crr.Name, fmt.Errorf("pod %s is now a different pod", crr.Spec.PodName))
		}
		if err := s.webhookRefusal(crr); err != nil {
			return err
		}
		_, _, err := s.world.admitCRR(crr)
		if apierrors.IsAlreadyExists(err) {
			// As kube.Writer: the CRR under the name is checked.
			if existing := s.world.crrs[cache.ObjectName{Namespace: crr.Namespace, Name: crr.Name}]; existing != nil {
				if foreign := reconciler.CheckExistingCRR(existing, crr); foreign != nil {
					return foreign
				}
			}
		}
		return err
	})
}

func (w *apiWriter) DeleteCRR(_ context.Context, namespace, name string) error {
	key := cache.ObjectName{Namespace: namespace, Name: name}
	pod := name
	if crr := w.s.world.crrs[key]; crr != nil {
		pod = crr.Spec.PodName
	}
	return w.write(MethodDeleteCRR, pod, name, func() error {
		w.s.world.deleteCRR(key, "deleted by the controller")
		return nil
	})
}

func (w *apiWriter) PatchPod(_ context.Context, namespace, name string, patch []byte) error {
	return w.write(MethodSwap, name, string(patch), func() error { return w.s.world.patchPod(namespace, name, patch, false) })
}

// AnnotatePod sets the annotation on the pod with that UID; the simulated
// kubelet gives it no meaning.
func (w *apiWriter) AnnotatePod(_ context.Context, namespace, name string, uid types.UID, key, value string) error {
	return w.write(MethodAnnotate, name, key+"="+value, func() error { return w.s.world.annotatePod(namespace, name, uid, key, value) })
}

func (w *apiWriter) PatchPodStatus(_ context.Context, namespace, name string, patch []byte) error {
	return w.write(MethodSettle, name, string(patch), func() error { return w.s.world.patchPod(namespace, name, patch, true) })
}

// write runs one API call with the scenario's faults: refused before it is
// applied, or timed out after (then the caller cannot tell).
func (w *apiWriter) write(method, pod, what string, apply func() error) error {
	s := w.s
	before, timeout := s.writeFault(method)
	err := before
	if err == nil {
		err = apply()
	}
	result := "ok"
	switch {
	case before != nil:
		result = "fault: " + before.Error()
	case err != nil:
		result = "refused: " + err.Error()
	case timeout:
		result = "applied, reported as timeout"
		err = apierrors.NewTimeoutError("simulated timeout after the write was applied", 1)
	}
	if before == nil && apply != nil && (err == nil || timeout) {
		s.stats.applied[method]++
	}
	s.stats.calls[method]++
	seen := "-"
	if p := w.c.cache.lastRead; p != nil && p.Name == pod {
		seen = fmt.Sprintf("uid=%s rv=%s", p.UID[:8], p.ResourceVersion)
	}
	s.trace.add(pod, "controller %d (read %s) %s %s -> %s", w.c.id, seen, method, what, result)
	return err
}

var (
	imagePath      = regexp.MustCompile(`^/spec/containers/[0-9]+/image$`)
	annotationPath = regexp.MustCompile(`^/metadata/annotations(/[^/]+)?$`)
)

// patchPod applies a JSON patch for real: test ops that fail refuse the whole
// patch with 422 Invalid, as the API server does; on the pod only container
// images may change; on the status subresource only the status is taken.
// annotatePod sets one annotation, with the pod's UID as precondition.
func (w *World) annotatePod(namespace, name string, uid types.UID, key, value string) error {
	e := w.pods[cache.ObjectName{Namespace: namespace, Name: name}]
	if e == nil {
		return apierrors.NewNotFound(podsResource, name)
	}
	if e.obj.UID != uid {
		return apierrors.NewConflict(podsResource, name, fmt.Errorf("uid %s is not %s", e.obj.UID, uid))
	}
	next := e.obj.DeepCopy()
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	next.Annotations[key] = value
	w.replacePod(e, next)
	return nil
}

func (w *World) patchPod(namespace, name string, patch []byte, status bool) error {
	e := w.pods[cache.ObjectName{Namespace: namespace, Name: name}]
	if e == nil {
		return apierrors.NewNotFound(podsResource, name)
	}
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("decode patch: %v", err))
	}
	for _, op := range p {
		path, _ := op.Path()
		if op.Kind() == "test" {
			continue
		}
		// The API server lets an update change metadata too; the spec only
		// in its images.
		if !status && !imagePath.MatchString(path) && !annotationPath.MatchString(path) {
			return invalid(name, fmt.Errorf("pod updates may not change fields other than container images: %s", path))
		}
	}
	doc, err := json.Marshal(e.obj)
	if err != nil {
		return fmt.Errorf("encode pod %s: %w", name, err)
	}
	out, err := p.Apply(doc)
	if err != nil {
		// As the API server answers a JSON patch that does not apply (a
		// test op failing): a bare 422, no details (k8s.io/apiserver
		// v0.35.4, pkg/endpoints/handlers/patch.go, applyJSPatch).
		return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
	}
	next := &corev1.Pod{}
	if err := json.Unmarshal(out, next); err != nil {
		return invalid(name, err)
	}
	old := e.obj
	if status {
		pod := *old
		pod.Status = next.Status
		next = &pod
	} else {
		next.Status = old.Status
	}
	w.replacePod(e, next)
	if status {
		w.s.check.statusPatched(e, old)
	} else {
		w.s.check.podPatched(e, old)
		w.s.after(w.s.jitter(e.node.kubeletLag, 0.5), func() { w.s.kubeletSeeSpec(e) })
	}
	return nil
}

func invalid(name string, err error) error {
	return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "patch", podsResource, name, err.Error(), 0, false)
}

// LivePod and LiveCRR read the world, as the controller's live reads read the
// API server (reconciler.LiveChecker); the report counts them.
func (w *apiWriter) LivePod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	w.s.stats.liveReads++
	e := w.s.world.pods[cache.ObjectName{Namespace: namespace, Name: name}]
	if e == nil {
		return nil, apierrors.NewNotFound(podsResource, name)
	}
	return e.obj, nil
}

func (w *apiWriter) LiveCRR(_ context.Context, namespace, name string) (*kruisev1alpha1.ContainerRecreateRequest, error) {
	w.s.stats.liveReads++
	crr := w.s.world.crrs[cache.ObjectName{Namespace: namespace, Name: name}]
	if crr == nil {
		return nil, apierrors.NewNotFound(crrResource, name)
	}
	return crr, nil
}

var _ reconciler.LiveChecker = (*apiWriter)(nil)
