package webhook

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/sidecar-terminator/sidecar-terminator/controller/native"
)

// Path is where the API server sends pod admissions.
const Path = "/mutate-pods"

// maxBody bounds a review's size: the API server caps a request at 3 MiB.
const maxBody = 4 << 20

// Handler answers AdmissionReviews for pod creation.
type Handler struct {
	// Nodes returns the cluster's nodes as now known (a lister's view).
	Nodes func() ([]*corev1.Node, error)
	// Config is the conversion's configuration.
	Config native.Config
	// Admissions counts answers by result; nil counts nothing.
	Admissions *prometheus.CounterVec
}

// Results of an admission, the Admissions counter's label.
const (
	ResultConverted = "converted"
	ResultUnchanged = "unchanged"
	ResultError     = "error"
)

// NewAdmissionsCounter registers the admissions counter.
func NewAdmissionsCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sidecar_terminator_native_admissions_total",
		Help: "Pod admissions answered by the native-sidecar webhook, by result (converted, unchanged, error: admitted unchanged).",
	}, []string{"result"})
	reg.MustRegister(c)
	return c
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
		return
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview with a request", http.StatusBadRequest)
		return
	}
	resp := h.Review(klog.FromContext(r.Context()), review.Request)
	review.Request, review.Response = nil, resp
	out, err := json.Marshal(review)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// Review answers one request. It always allows the pod: a conversion that
// cannot be made leaves the pod as it came, with the reason in the log and,
// for the client, in the answer's warnings.
func (h *Handler) Review(logger klog.Logger, req *admissionv1.AdmissionRequest) (resp *admissionv1.AdmissionResponse) {
	resp = &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	result := ResultUnchanged
	defer func() {
		if r := recover(); r != nil {
			logger.Error(fmt.Errorf("%v", r), "Native-sidecar admission panicked; the pod is admitted unchanged", "namespace", req.Namespace, "name", req.Name)
			resp, result = &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}, ResultError
		}
		if h.Admissions != nil {
			h.Admissions.WithLabelValues(result).Inc()
		}
	}()
	if req.Kind.Kind != "Pod" || req.Kind.Group != "" || req.Operation != admissionv1.Create || req.SubResource != "" {
		return resp
	}
	patch, plan, err := h.convert(req)
	if err != nil {
		result = ResultError
		logger.Error(err, "Native-sidecar admission failed; the pod is admitted unchanged", "namespace", req.Namespace, "name", podName(req))
		resp.Warnings = []string{"sidecar-terminator: sidecars not converted to native sidecars: " + err.Error()}
		return resp
	}
	if patch == nil {
		logger.V(2).Info("Pod admitted unchanged", "namespace", req.Namespace, "name", podName(req), "reason", plan.Reason)
		for _, p := range plan.Problems {
			resp.Warnings = append(resp.Warnings, fmt.Sprintf("sidecar-terminator: %s: %s", p.Reason, p.Message))
		}
		return resp
	}
	result = ResultConverted
	pt := admissionv1.PatchTypeJSONPatch
	resp.Patch, resp.PatchType = patch, &pt
	logger.Info("Sidecars converted to native sidecars", "namespace", req.Namespace, "name", podName(req), "containers", plan.InitOrder, "reason", plan.Reason)
	return resp
}

func podName(req *admissionv1.AdmissionRequest) string {
	if req.Name != "" {
		return req.Name
	}
	var meta struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if json.Unmarshal(req.Object.Raw, &meta) == nil && meta.Metadata.GenerateName != "" {
		return meta.Metadata.GenerateName + "(generated)"
	}
	return ""
}

// convert plans the pod's conversion and returns its JSON patch, nil when
// nothing moves.
func (h *Handler) convert(req *admissionv1.AdmissionRequest) ([]byte, native.Plan, error) {
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return nil, native.Plan{}, fmt.Errorf("decode pod: %w", err)
	}
	nodes, err := h.Nodes()
	if err != nil {
		return nil, native.Plan{}, fmt.Errorf("list nodes: %w", err)
	}
	plan := native.Decide(&pod, nodes, h.Config)
	if !plan.Convert {
		return nil, plan, nil
	}
	patch, err := Patch(req.Object.Raw, &pod, native.Apply(&pod, plan), plan.InitOrder)
	return patch, plan, err
}

// Patch is the JSON patch from the pod as sent (raw) to the converted pod:
// the moved containers taken out of spec.containers and appended to
// spec.initContainers as they were sent, every field kept (fields this
// build's API types do not know included), with restartPolicy Always; and
// the annotations that changed.
func Patch(raw []byte, before, after *corev1.Pod, moved []string) ([]byte, error) {
	var obj struct {
		Spec struct {
			Containers     []map[string]json.RawMessage `json:"containers"`
			InitContainers []json.RawMessage            `json:"initContainers"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("decode pod: %w", err)
	}
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value,omitempty"`
	}
	var ops []op
	index := map[string]int{}
	for i, c := range obj.Spec.Containers {
		var name string
		if err := json.Unmarshal(c["name"], &name); err != nil {
			return nil, fmt.Errorf("decode container %d's name: %w", i, err)
		}
		index[name] = i
	}
	var indexes []int
	for _, n := range moved {
		i, ok := index[n]
		if !ok {
			return nil, fmt.Errorf("container %q is not in the pod as sent", n)
		}
		indexes = append(indexes, i)
	}
	// Removed from the last, so earlier indexes still hold.
	slices.SortFunc(indexes, func(a, b int) int { return b - a })
	for _, i := range indexes {
		ops = append(ops, op{Op: "remove", Path: fmt.Sprintf("/spec/containers/%d", i)})
	}
	for k, n := range moved {
		c := obj.Spec.Containers[index[n]]
		c["restartPolicy"] = json.RawMessage(`"Always"`)
		if k == 0 && obj.Spec.InitContainers == nil {
			ops = append(ops, op{Op: "add", Path: "/spec/initContainers", Value: []map[string]json.RawMessage{c}})
			continue
		}
		ops = append(ops, op{Op: "add", Path: "/spec/initContainers/-", Value: c})
	}
	if before.Annotations == nil {
		ops = append(ops, op{Op: "add", Path: "/metadata/annotations", Value: after.Annotations})
	} else {
		keys := make([]string, 0, len(before.Annotations)+len(after.Annotations))
		for k := range before.Annotations {
			keys = append(keys, k)
		}
		for k := range after.Annotations {
			if _, ok := before.Annotations[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			b, inBefore := before.Annotations[k]
			a, inAfter := after.Annotations[k]
			path := "/metadata/annotations/" + escape(k)
			switch {
			case !inAfter:
				ops = append(ops, op{Op: "remove", Path: path})
			case !inBefore || a != b:
				ops = append(ops, op{Op: "add", Path: path, Value: a})
			}
		}
	}
	return json.Marshal(ops)
}

// escape makes a map key a JSON pointer token (RFC 6901).
func escape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
