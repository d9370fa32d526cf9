package cluster

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// Metric reads one series of the controller's /metrics, e.g.
// `sidecar_terminator_actions_total{method="ImageSwap",result="success"}`;
// 0 when the series is absent.
func (ctl *Controller) Metric(ctx context.Context, series string) (float64, error) {
	body, err := ctl.scrape(ctx)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, series+" ") {
			return strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(line, series)), 64)
		}
	}
	return 0, nil
}

func (ctl *Controller) scrape(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ctl.MetricsURL, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

// MetricTotal sums every series of one metric name, whatever its labels
// (name{...} value or name value).
func (ctl *Controller) MetricTotal(ctx context.Context, name string) (float64, error) {
	body, err := ctl.scrape(ctx)
	if err != nil {
		return 0, err
	}
	total := 0.0
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		total += v
	}
	return total, nil
}

// auditEntry is the part of an audit.k8s.io/v1 Event read here.
type auditEntry struct {
	Stage     string                    `json:"stage"`
	Verb      string                    `json:"verb"`
	User      struct{ Username string } `json:"user"`
	ObjectRef struct {
		Resource, Subresource, Namespace, Name string
	} `json:"objectRef"`
	ResponseStatus struct{ Code int } `json:"responseStatus"`
	// StageTimestamp is when the request completed.
	StageTimestamp time.Time `json:"stageTimestamp"`
	// RequestReceivedTimestamp is when the API server took it in.
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// ControllerServiceAccountUser is the controller's identity in audit logs.
const ControllerServiceAccountUser = "system:serviceaccount:" + ControllerNamespace + ":" + ControllerName

// MutatingRequests reads an audit log (Options.AuditLogPath) and lists the
// completed mutating requests of one user, leaving out events and leases
// (bookkeeping, not work), as "verb resource[/subresource] name code".
func MutatingRequests(auditLog, user string) ([]string, error) {
	return MutatingRequestsIn(auditLog, user, "")
}

// MutatingRequestsIn is MutatingRequests for one namespace ("" for all).
func MutatingRequestsIn(auditLog, user, namespace string) ([]string, error) {
	timed, err := TimedMutatingRequests(auditLog, user, namespace)
	out := make([]string, len(timed))
	for i, r := range timed {
		out[i] = r.Request
	}
	return out, err
}

// TimedRequest is one completed mutating request and when it completed.
type TimedRequest struct {
	// Request is "verb resource[/subresource] name code".
	Request string
	At      time.Time
}

// TimedMutatingRequests is MutatingRequestsIn with each request's completion
// time, for counting the writes made during a window (a chaos run's fault).
func TimedMutatingRequests(auditLog, user, namespace string) ([]TimedRequest, error) {
	var out []TimedRequest
	err := scanAudit(auditLog, user, func(a *auditEntry) {
		if namespace != "" && a.ObjectRef.Namespace != namespace {
			return
		}
		switch a.Verb {
		case "create", "update", "patch", "delete", "deletecollection":
		default:
			return
		}
		if a.ObjectRef.Resource == "events" || a.ObjectRef.Resource == "leases" {
			return
		}
		res := a.ObjectRef.Resource
		if a.ObjectRef.Subresource != "" {
			res += "/" + a.ObjectRef.Subresource
		}
		name := a.ObjectRef.Name
		if name == "" {
			name = "-" // a create refused before its body was read names nothing
		}
		out = append(out, TimedRequest{Request: a.Verb + " " + res + " " + name + " " + strconv.Itoa(a.ResponseStatus.Code), At: a.StageTimestamp})
	})
	return out, err
}

// ServerTime is how many requests of one kind a user made and how long
// the API server took over them, from taking each in to its answer (audit
// stages RequestReceived to ResponseComplete; the client's own waiting and
// the network are not in it).
type ServerTime struct {
	// Kind is "verb resource[/subresource]".
	Kind  string
	Count int
	Total time.Duration
}

// Mean is the average server time of one request.
func (t ServerTime) Mean() time.Duration {
	if t.Count == 0 {
		return 0
	}
	return t.Total / time.Duration(t.Count)
}

// ServerTimes lists, per kind of request the audit policy records (every
// mutating request, events included, and GETs of CRRs and Jobs), how long
// the API server took over one user's requests, most requests first.
func ServerTimes(auditLog, user string) ([]ServerTime, error) {
	byKind := map[string]*ServerTime{}
	err := scanAudit(auditLog, user, func(a *auditEntry) {
		kind := a.Verb + " " + a.ObjectRef.Resource
		if a.ObjectRef.Subresource != "" {
			kind += "/" + a.ObjectRef.Subresource
		}
		t := byKind[kind]
		if t == nil {
			t = &ServerTime{Kind: kind}
			byKind[kind] = t
		}
		t.Count++
		t.Total += a.StageTimestamp.Sub(a.RequestReceivedTimestamp)
	})
	out := make([]ServerTime, 0, len(byKind))
	for _, t := range byKind {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Kind < out[j].Kind
	})
	return out, err
}

// ReadsIn lists the completed GETs of one user on one resource (as the
// audit policy records them: CRRs and Jobs) in a namespace, by object name.
func ReadsIn(auditLog, user, namespace, resource string) ([]string, error) {
	var out []string
	err := scanAudit(auditLog, user, func(a *auditEntry) {
		if a.Verb == "get" && a.ObjectRef.Resource == resource && a.ObjectRef.Subresource == "" && a.ObjectRef.Namespace == namespace {
			out = append(out, a.ObjectRef.Name)
		}
	})
	return out, err
}

// scanAudit calls each for every completed request of one user in the
// audit log, in the order logged.
func scanAudit(auditLog, user string, each func(*auditEntry)) error {
	f, err := os.Open(auditLog)
	if err != nil {
		return fmt.Errorf("open audit log: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var a auditEntry
		if json.Unmarshal(sc.Bytes(), &a) != nil || a.Stage != "ResponseComplete" || a.User.Username != user {
			continue
		}
		each(&a)
	}
	return sc.Err()
}

// PodEvents lists the events on a pod as "Type Reason".
func PodEvents(ctx context.Context, kube kubernetes.Interface, pod *corev1.Pod) ([]string, error) {
	list, err := kube.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(pod.UID)).String()})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ev := range list.Items {
		out = append(out, ev.Type+" "+ev.Reason)
	}
	return out, nil
}

// FlushAudit makes a request of its own (a ConfigMap named audit-flush in
// namespace) and waits until the audit log holds it: the API server writes
// its audit log in batches, in order, so every request before it is then in
// the file too.
func FlushAudit(ctx context.Context, kube kubernetes.Interface, auditLog, namespace string) error {
	marker := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "audit-flush", Namespace: namespace}}
	if _, err := kube.CoreV1().ConfigMaps(namespace).Create(ctx, marker, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("audit marker: %w", err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		b, err := os.ReadFile(auditLog)
		if err == nil && strings.Contains(string(b), `"name":"audit-flush"`) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the audit log never showed the marker request")
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// EventTime is when an event happened: its eventTime (events.k8s.io), else
// its firstTimestamp (core/v1).
func EventTime(e corev1.Event) time.Time {
	if !e.EventTime.IsZero() {
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}
