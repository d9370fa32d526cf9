package app

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	apiversion "k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/native"
)

func freeAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestNativeSidecarWebhookServesConversionsOverTLSTrustedByItsCABundle(t *testing.T) {
	client := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2"}}},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "sidecar-terminator"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "pods.native-sidecars.sidecar-terminator.io"}}})
	client.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &apiversion.Info{GitVersion: "v1.37.2"}
	t.Setenv("POD_NAMESPACE", "st-system")
	o := DefaultOptions()
	o.NativeSidecars.BindAddress = freeAddress(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 1)
	if err := startNativeSidecars(ctx, o, client, prometheus.NewRegistry(), errs); err != nil {
		t.Fatal(err)
	}
	cfg, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "sidecar-terminator", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cfg.Webhooks[0].ClientConfig.CABundle) {
		t.Fatal("no caBundle written")
	}
	httpc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, ServerName: "sidecar-terminator-webhook.st-system.svc", MinVersion: tls.VersionTLS12}}}
	pod := `{"metadata":{"name":"p"},"spec":{"restartPolicy":"Never","containers":[
	 {"name":"main","image":"m"},{"name":"proxy","image":"p","env":[{"name":"KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT","value":"true"}]}]}}`
	body, _ := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "u", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Namespace: "ns", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(pod)}}})
	// The node cache syncs shortly after start; until then pods pass unchanged.
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := httpc.Post("https://"+o.NativeSidecars.BindAddress+"/mutate-pods", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var out admissionv1.AdmissionReview
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if !out.Response.Allowed {
			t.Fatalf("not allowed: %+v", out.Response)
		}
		if out.Response.Patch != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no conversion once the node cache synced: %+v", out.Response)
		}
		time.Sleep(50 * time.Millisecond)
	}
	select {
	case err := <-errs:
		t.Fatalf("server failed: %v", err)
	default:
	}
}

func TestNativeSidecarWebhookIsOffByDefault(t *testing.T) {
	client := fake.NewClientset()
	if err := startNativeSidecars(context.Background(), DefaultOptions(), client, prometheus.NewRegistry(), nil); err != nil {
		t.Fatal(err)
	}
	if len(client.Actions()) != 0 {
		t.Errorf("the webhook is off by default, yet the controller called the API: %v", client.Actions())
	}
}

func TestExplainShowsTheNativeSidecarDecision(t *testing.T) {
	newNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2"}}}
	oldNode := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n0"}, Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.28.1"}}}
	optedIn := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{native.LabelOptIn: native.LabelOptInValue}}}
	pod := func(annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", Annotations: annotations},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, NodeName: "n1", Containers: []corev1.Container{
				{Name: "main"}, {Name: "proxy", Env: []corev1.EnvVar{{Name: decision.EnvTerminate, Value: "true"}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	for name, c := range map[string]struct {
		objs []runtime.Object
		pod  *corev1.Pod
		want []string
	}{
		"converted at admission": {pod: pod(map[string]string{native.AnnotationConverted: "moved proxy to initContainers as native sidecars: because"}),
			want: []string{"converted at admission: moved proxy"}},
		"not opted in, would convert": {objs: []runtime.Object{newNode}, pod: pod(nil),
			want: []string{"not opted in", "converts (initContainers order [proxy])", "proxy yes moved"}},
		"opted in, an old node": {objs: []runtime.Object{optedIn, newNode, oldNode}, pod: pod(nil),
			want: []string{"opted in but not converted", "does not convert: node n0 runs kubelet v1.28.1", "proxy no the pod is not converted"}},
	} {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset(c.objs...)
			client.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &apiversion.Info{GitVersion: "v1.37.2"}
			var out bytes.Buffer
			writeNativeSidecars(context.Background(), &out, client, labels.SelectorFromSet(labels.Set{"type": "virtual-kubelet"}), c.pod)
			words := strings.Join(strings.Fields(out.String()), " ") // table padding aside
			for _, w := range c.want {
				if !strings.Contains(words, w) {
					t.Errorf("explain lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
}
