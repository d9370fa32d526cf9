package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// apiServer serves GETs of the objects in a fake clientset's tracker over
// HTTP, as the API server would (JSON, with kinds), and discovery of the
// core group only: enough for a client built from a kubeconfig. Every other
// path is a 404. It records the paths asked for.
type apiServer struct {
	tracker clienttesting.ObjectTracker
	mu      sync.Mutex
	paths   []string
}

func (s *apiServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.paths = append(s.paths, r.Method+" "+r.URL.Path)
	s.mu.Unlock()
	switch r.URL.Path {
	case "/api":
		writeJSON(w, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"}})
		return
	case "/apis":
		writeJSON(w, &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}})
		return
	case "/version":
		writeJSON(w, map[string]string{"major": "1", "minor": "36", "gitVersion": "v1.36.0"})
		return
	}
	gvr, ns, name, ok := parsePath(r.URL.Path)
	if r.Method != http.MethodGet || !ok {
		notFound(w, r.URL.Path)
		return
	}
	var obj runtime.Object
	var err error
	if name != "" {
		obj, err = s.tracker.Get(gvr, ns, name)
	} else {
		kinds, kerr := restKinds(gvr)
		if kerr != nil {
			notFound(w, r.URL.Path)
			return
		}
		obj, err = s.tracker.List(gvr, kinds, ns)
	}
	if err != nil {
		notFound(w, r.URL.Path)
		return
	}
	kinds, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	obj.GetObjectKind().SetGroupVersionKind(kinds[0])
	writeJSON(w, obj)
}

// restKinds is the kind of a list of resource gvr.
func restKinds(gvr schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	kinds := map[string]string{"pods": "Pod", "events": "Event", "deployments": "Deployment", "nodes": "Node", "namespaces": "Namespace"}
	k, ok := kinds[gvr.Resource]
	if !ok {
		return schema.GroupVersionKind{}, fmt.Errorf("no kind for %s", gvr)
	}
	return gvr.GroupVersion().WithKind(k), nil
}

// parsePath reads /api/v1/[namespaces/NS/]RES[/NAME] and
// /apis/G/V/[namespaces/NS/]RES[/NAME].
func parsePath(p string) (gvr schema.GroupVersionResource, ns, name string, ok bool) {
	parts := strings.Split(strings.Trim(p, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		gvr.Version, parts = parts[1], parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		gvr.Group, gvr.Version, parts = parts[1], parts[2], parts[3:]
	default:
		return gvr, "", "", false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		ns, parts = parts[1], parts[2:]
	}
	switch len(parts) {
	case 1:
		gvr.Resource = parts[0]
	case 2:
		gvr.Resource, name = parts[0], parts[1]
	default:
		return gvr, "", "", false
	}
	return gvr, ns, name, true
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func notFound(w http.ResponseWriter, path string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	writeJSON(w, &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
		Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound, Message: path + " not found"})
}

// kubeconfig writes a kubeconfig whose context "ctx" points at server with
// namespace "elsewhere", and whose current context points nowhere: the
// plugin must take the context and the namespace it is given.
func kubeconfig(t *testing.T, server string) string {
	t.Helper()
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: nowhere
clusters:
- {name: fake, cluster: {server: %q}}
- {name: none, cluster: {server: "http://127.0.0.1:1"}}
users:
- {name: u, user: {token: t}}
contexts:
- {name: ctx, context: {cluster: fake, user: u, namespace: elsewhere}}
- {name: nowhere, context: {cluster: none, user: u}}
`, server)
	p := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// `kubectl sidecar-terminator explain POD -n NS` runs the controller's
// explain: the pod is read from the cluster of the kubeconfig and context
// given, in the namespace given, and the output is explain's (the
// containers' marks, the decision, the controller's events on the pod).
func TestPluginExplainsAPodFromTheKubeconfig(t *testing.T) {
	at := time.Now().Add(-time.Minute)
	pod := podtest.Pod("job-x").Namespace("team").UID("u1").Node("n1").Phase(corev1.PodSucceeded).
		Container("main", podtest.Exited(0, at)).
		Container("proxy", podtest.Env(decision.EnvTerminate, "true"), podtest.Exited(0, at.Add(time.Second))).Build()
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e1", Namespace: "team"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "team", Name: "job-x", UID: "u1"},
		Reason:         "SidecarTerminating", Message: "Stopping sidecars [proxy]: created ContainerRecreateRequest job-x-st1 (attempt 1)",
		Type: corev1.EventTypeNormal, Count: 1, Source: corev1.EventSource{Component: "sidecar-terminator"}, LastTimestamp: metav1.NewTime(at)}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	srv := &apiServer{tracker: fake.NewClientset(pod, ev, node).Tracker()}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	cmd := newCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs([]string{"explain", "job-x", "-n", "team", "--kubeconfig", kubeconfig(t, ts.URL), "--context", "ctx"})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("explain: %v\n%s\nrequests: %v", err, out.String(), srv.paths)
	}
	got := out.String()
	for _, want := range []string{
		`Pod team/job-x on node "n1"`, "ContainerRecreateRequest API served: false",
		"KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT", "Decision:",
		"Events from sidecar-terminator", "created ContainerRecreateRequest job-x-st1",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the plugin's explain lacks %q:\n%s", want, got)
		}
	}
	if !strings.Contains(strings.Join(srv.paths, "\n"), "GET /api/v1/namespaces/team/pods/job-x") {
		t.Errorf("the pod was not read from team: %v", srv.paths)
	}
}

// The plugin is explain only: no way to start the controller from it.
func TestPluginHasOnlyExplain(t *testing.T) {
	cmd := newCommand()
	var names []string
	for _, c := range cmd.Commands() {
		names = append(names, c.Name())
	}
	if len(names) != 1 || names[0] != "explain" {
		t.Errorf("subcommands %v, want [explain]", names)
	}
	if cmd.RunE != nil || cmd.Run != nil {
		t.Error("the plugin's root command runs something")
	}
	var help bytes.Buffer
	cmd.SetOut(&help)
	cmd.SetArgs([]string{"explain", "--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"kubectl sidecar-terminator explain POD", "--namespace", "--context", "--kubeconfig"} {
		if !strings.Contains(help.String(), want) {
			t.Errorf("explain --help lacks %q:\n%s", want, help.String())
		}
	}
}
