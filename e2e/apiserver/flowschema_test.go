package apiserver

import (
	"context"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sidecar-terminator/sidecar-terminator/controller/deploy"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
	"github.com/sidecar-terminator/sidecar-terminator/hack/toolbin"
)

// The chart's optional FlowSchema (flowControl.enabled) on a real
// kube-apiserver: created as helm renders it, it classifies the controller's
// own requests (its ServiceAccount's token) into the priority level the chart
// names, workload-high, while its events stay with every other service
// account's. The API server says which FlowSchema and priority level served a
// request in the X-Kubernetes-PF-FlowSchema-UID and
// X-Kubernetes-PF-PriorityLevel-UID response headers
// (k8s.io/apiserver v0.35.4, pkg/server/filters/priority-and-fairness.go).
func TestChartFlowSchemaClassifiesTheControllersRequests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, true)

	helm, err := toolbin.Path(ctx, "helm")
	if err != nil {
		t.Fatalf("helm: %v", err)
	}
	root, _ := filepath.Abs("../..")
	objs, err := deploy.Template(ctx, helm, deploy.ChartDir(root), cluster.ControllerNamespace,
		"--set", "flowControl.enabled=true", "--api-versions", "flowcontrol.apiserver.k8s.io/v1", "--show-only", "templates/flowschema.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 || objs[0].GetAPIVersion() != "flowcontrol.apiserver.k8s.io/v1" {
		t.Fatalf("the chart rendered %d objects for flowControl.enabled, want one flowcontrol.apiserver.k8s.io/v1 FlowSchema", len(objs))
	}
	var fs flowcontrolv1.FlowSchema
	mustConvert(t, objs[0].Object, &fs)
	created, err := e.kube.FlowcontrolV1().FlowSchemas().Create(ctx, &fs, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the API server refused the chart's FlowSchema: %v", err)
	}
	level, err := e.kube.FlowcontrolV1().PriorityLevelConfigurations().Get(ctx, fs.Spec.PriorityLevelConfiguration.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("priority level %q the chart names: %v", fs.Spec.PriorityLevelConfiguration.Name, err)
	}
	others, err := e.kube.FlowcontrolV1().FlowSchemas().Get(ctx, "service-accounts", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Requests with the controller's own credentials.
	cfg, err := clientcmd.BuildConfigFromFlags("", e.ctl.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	served := func(path string) (flowSchema, level types.UID, code int) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return types.UID(resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID")), types.UID(resp.Header.Get("X-Kubernetes-PF-PriorityLevel-UID")), resp.StatusCode
	}
	// The API server's flow-control configuration is read from its informer,
	// which sees the new FlowSchema a moment after the create.
	var got types.UID
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		got, _, _ = served("/api/v1/pods?limit=1")
		return got == created.UID, nil
	})
	if err != nil {
		t.Fatalf("the controller's pod list was served by FlowSchema %q, want the chart's %q (%s)", got, created.UID, created.Name)
	}
	for _, path := range []string{"/api/v1/pods?limit=1", "/apis/apps.kruise.io/v1alpha1/containerrecreaterequests?limit=1", "/api/v1/nodes?limit=1"} {
		fsUID, plUID, code := served(path)
		if fsUID != created.UID || plUID != level.UID || code != http.StatusOK {
			t.Errorf("GET %s: FlowSchema %q, priority level %q, HTTP %d; want the chart's %q in %s (%q), 200",
				path, fsUID, plUID, code, created.UID, level.Name, level.UID)
		}
	}
	// Events are not among its rules: they stay with every other service
	// account's requests, best effort.
	if fsUID, _, _ := served("/api/v1/namespaces/default/events?limit=1"); fsUID != others.UID {
		t.Errorf("the controller's events were served by FlowSchema %q, want service-accounts (%q)", fsUID, others.UID)
	}
}
