package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/native"
)

func nodes(versions ...string) func() ([]*corev1.Node, error) {
	return func() ([]*corev1.Node, error) {
		var out []*corev1.Node
		for i, v := range versions {
			out = append(out, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n" + string(rune('a'+i))},
				Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: v}}})
		}
		return out, nil
	}
}

func handler(n func() ([]*corev1.Node, error)) *Handler {
	return &Handler{Nodes: n, Config: native.Config{
		VirtualNodes: labels.SelectorFromSet(labels.Set{"type": "virtual-kubelet"}), ServerVersion: "v1.37.2"}}
}

// rawPod is a Job's pod as the API server sends it, with a field this
// build's types do not know on the sidecar, which the patch must keep.
const rawPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"job-","namespace":"ns",
 "annotations":{"sidecar-terminator.io/stop-order":"shipper,proxy"}},
 "spec":{"restartPolicy":"Never","initContainers":[{"name":"setup","image":"busybox"}],
 "containers":[
  {"name":"proxy","image":"proxy:1","env":[{"name":"KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT","value":"true"}],"futureField":{"x":1}},
  {"name":"main","image":"main:1"},
  {"name":"shipper","image":"shipper:1","env":[{"name":"KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT","value":"true"}]}]}}`

func review(t *testing.T, h *Handler, op admissionv1.Operation, raw string) *admissionv1.AdmissionResponse {
	t.Helper()
	body, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "u1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Namespace: "ns", Operation: op, Object: runtime.RawExtension{Raw: []byte(raw)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.Response == nil || out.Response.UID != "u1" || !out.Response.Allowed {
		t.Fatalf("answer does not allow the request it answers: %+v", out.Response)
	}
	return out.Response
}

func patched(t *testing.T, raw string, resp *admissionv1.AdmissionResponse) map[string]any {
	t.Helper()
	if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("no JSONPatch in %+v", resp)
	}
	p, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Apply([]byte(raw))
	if err != nil {
		t.Fatalf("the patch does not apply: %v\n%s", err, resp.Patch)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestConvertsOnCreateKeepingEveryFieldOfTheMovedContainers(t *testing.T) {
	resp := review(t, handler(nodes("v1.37.2", "v1.33.1")), admissionv1.Create, rawPod)
	pod := patched(t, rawPod, resp)
	spec := pod["spec"].(map[string]any)
	var inits, regular []string
	for _, c := range spec["initContainers"].([]any) {
		inits = append(inits, c.(map[string]any)["name"].(string))
	}
	for _, c := range spec["containers"].([]any) {
		regular = append(regular, c.(map[string]any)["name"].(string))
	}
	if diff := cmp.Diff([]string{"setup", "proxy", "shipper"}, inits); diff != "" {
		t.Errorf("initContainers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"main"}, regular); diff != "" {
		t.Errorf("containers (-want +got):\n%s", diff)
	}
	proxy := spec["initContainers"].([]any)[1].(map[string]any)
	if proxy["restartPolicy"] != "Always" || proxy["futureField"] == nil || proxy["image"] != "proxy:1" {
		t.Errorf("moved proxy = %v", proxy)
	}
	if spec["initContainers"].([]any)[0].(map[string]any)["restartPolicy"] != nil {
		t.Errorf("the existing init container was changed")
	}
	ann := pod["metadata"].(map[string]any)["annotations"].(map[string]any)
	if _, ok := ann[decision.AnnotationStopOrder]; ok {
		t.Errorf("stop-order kept: %v", ann)
	}
	if !strings.HasPrefix(ann[native.AnnotationConverted].(string), "moved proxy,shipper ") {
		t.Errorf("%s = %v", native.AnnotationConverted, ann[native.AnnotationConverted])
	}
}

func TestAddsInitContainersAndAnnotationsWhenThePodHasNone(t *testing.T) {
	raw := `{"metadata":{"name":"p"},"spec":{"restartPolicy":"OnFailure","containers":[
	 {"name":"main","image":"m"},{"name":"log","image":"l","env":[{"name":"KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT","value":"TRUE"}]}]}}`
	pod := patched(t, raw, review(t, handler(nodes("v1.29.0")), admissionv1.Create, raw))
	inits := pod["spec"].(map[string]any)["initContainers"].([]any)
	if len(inits) != 1 || inits[0].(map[string]any)["name"] != "log" {
		t.Errorf("initContainers = %v", inits)
	}
	if pod["metadata"].(map[string]any)["annotations"].(map[string]any)[native.AnnotationConverted] == nil {
		t.Errorf("no %s annotation: %v", native.AnnotationConverted, pod["metadata"])
	}
}

func TestAdmitsUnchanged(t *testing.T) {
	notJob := strings.Replace(rawPod, `"Never"`, `"Always"`, 1)
	badMark := strings.Replace(rawPod, `"value":"true"}]}]`, `"value":"yes"}]}]`, 1)
	cases := map[string]struct {
		h        *Handler
		op       admissionv1.Operation
		raw      string
		warnings bool
	}{
		"an old node":                {h: handler(nodes("v1.37.2", "v1.28.0")), op: admissionv1.Create, raw: rawPod},
		"an update":                  {h: handler(nodes("v1.37.2")), op: admissionv1.Update, raw: rawPod},
		"not Job-like":               {h: handler(nodes("v1.37.2")), op: admissionv1.Create, raw: notJob},
		"a bad mark":                 {h: handler(nodes("v1.37.2")), op: admissionv1.Create, raw: badMark, warnings: true},
		"nodes cannot be listed":     {h: handler(func() ([]*corev1.Node, error) { return nil, errors.New("no cache") }), op: admissionv1.Create, raw: rawPod, warnings: true},
		"a pod that does not decode": {h: handler(nodes("v1.37.2")), op: admissionv1.Create, raw: `{"spec":{"containers":"x"}}`, warnings: true},
		"the node lister panics":     {h: handler(func() ([]*corev1.Node, error) { panic("boom") }), op: admissionv1.Create, raw: rawPod},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp := review(t, tc.h, tc.op, tc.raw)
			if resp.Patch != nil || resp.PatchType != nil {
				t.Errorf("patched: %s", resp.Patch)
			}
			if tc.warnings != (len(resp.Warnings) > 0) {
				t.Errorf("warnings = %q, want some: %v", resp.Warnings, tc.warnings)
			}
		})
	}
}

func TestRejectsWhatIsNotAReview(t *testing.T) {
	h := handler(nodes("v1.37.2"))
	for name, req := range map[string]*http.Request{
		"GET":        httptest.NewRequest(http.MethodGet, Path, nil),
		"no request": httptest.NewRequest(http.MethodPost, Path, strings.NewReader(`{"kind":"AdmissionReview"}`)),
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code < 400 {
			t.Errorf("%s: status %d", name, rec.Code)
		}
	}
}
