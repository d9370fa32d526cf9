package kube

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// LiveReader.Node: a node the API server has, with its labels,
// kubeletVersion and providerID; one it does not have, not found.
func TestLiveReaderNode(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vk-1", Labels: map[string]string{"type": "virtual-kubelet"}},
		Spec:   corev1.NodeSpec{ProviderID: "azure:///aci"},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.25.0-vk-azure-aci-1.6.4"}}}
	l := LiveReader{Client: fake.NewClientset(node)}
	f, ok := l.Node("vk-1")
	if !ok || f.Labels["type"] != "virtual-kubelet" || f.KubeletVersion != "v1.25.0-vk-azure-aci-1.6.4" || f.ProviderID != "azure:///aci" {
		t.Errorf("Node(vk-1) = %+v, %v; want its labels, kubeletVersion and providerID", f, ok)
	}
	if p, _ := decision.PlatformOf(f, true); p != decision.PlatformAzureACI {
		t.Errorf("platform of vk-1 = %s, want %s", p, decision.PlatformAzureACI)
	}
	if f, ok := l.Node("gone"); ok || f.Labels != nil {
		t.Errorf("Node(gone) = %+v, %v; want nothing, false", f, ok)
	}
}

// explain's LiveReader reads the node's NodeImage itself, with the same rule
// as the cache: none is not known, an old one never written by the daemon
// says absent, one it wrote says present, and a failed read is not known
// (a CRR is tried) and says why. Without a metadata client it looks nothing
// up.
func TestLiveReaderTellsWhetherKruiseDaemonRuns(t *testing.T) {
	now := podtest.Epoch
	scheme := runtime.NewScheme()
	metav1.AddMetaToScheme(scheme)
	typed := func(ni *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadata {
		ni.TypeMeta = metav1.TypeMeta{APIVersion: nodeImagesResource.GroupVersion().String(), Kind: "NodeImage"}
		return ni
	}
	meta := metadatafake.NewSimpleMetadataClient(scheme,
		typed(nodeImage("no-daemon", time.Hour, now, managerCreate)),
		typed(nodeImage("daemon", time.Hour, now, managerCreate, daemonStatusWrite)))
	failing := metadatafake.NewSimpleMetadataClient(scheme)
	failing.PrependReactor("get", "nodeimages", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("etcd down"))
	})
	for _, tc := range []struct {
		name  string
		l     LiveReader
		node  string
		state decision.DaemonState
		why   string
	}{
		{"no metadata client", LiveReader{}, "no-daemon", decision.DaemonUnknown, "not looked up"},
		{"no NodeImage", LiveReader{Meta: meta}, "gone", decision.DaemonUnknown, "no NodeImage"},
		{"never written", LiveReader{Meta: meta}, "no-daemon", decision.DaemonAbsent, "never wrote"},
		{"written by the daemon", LiveReader{Meta: meta}, "daemon", decision.DaemonServes, "kruise-daemon wrote"},
		{"read fails", LiveReader{Meta: failing}, "daemon", decision.DaemonUnknown, "could not be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			state, why := tc.l.KruiseDaemon(tc.node, now, reconciler.DefaultKruiseDaemonGrace)
			if state != tc.state || !strings.Contains(why, tc.why) {
				t.Errorf("state %v (%s), want %v (%q)", state, why, tc.state, tc.why)
			}
		})
	}
}

// explain's LiveReader lists the pod's CRRs with our labels from the API
// server: ours for this pod, not another pod's; an error is returned as one;
// without the CRR API, none and no request.
func TestLiveReaderListsOnlyThisPodsCRRs(t *testing.T) {
	pod := podtest.Pod("p").Namespace("default").UID("uid-1").Build()
	crr := func(name, uid string) *kruisev1alpha1.ContainerRecreateRequest {
		return &kruisev1alpha1.ContainerRecreateRequest{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
			Labels: map[string]string{reconciler.LabelManagedBy: reconciler.ManagedByValue, reconciler.LabelPodUID: uid}}}
	}
	k := kruisefake.NewSimpleClientset(crr("ours", "uid-1"), crr("theirs", "uid-2"))
	got, err := LiveReader{Kruise: k, CRRAPI: true}.CRRs(pod)
	if err != nil || len(got) != 1 || got[0].Name != "ours" {
		t.Errorf("CRRs = %v, %v; want [ours]", names(got), err)
	}
	failing := kruisefake.NewSimpleClientset()
	failing.PrependReactor("list", "containerrecreaterequests", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInternalError(errors.New("etcd down"))
	})
	if got, err := (LiveReader{Kruise: failing, CRRAPI: true}).CRRs(pod); err == nil || got != nil {
		t.Errorf("CRRs on a failing API server = %v, %v; want an error", names(got), err)
	}
	if got, err := (LiveReader{Kruise: failing}).CRRs(pod); err != nil || got != nil || len(failing.Actions()) != 1 {
		t.Errorf("CRRs without the CRR API = %v, %v after %d requests; want none, no error, no new request", names(got), err, len(failing.Actions()))
	}
}

func names(crrs []*kruisev1alpha1.ContainerRecreateRequest) []string {
	var out []string
	for _, c := range crrs {
		out = append(out, c.Name)
	}
	return out
}

// explain's live reads go over HTTP with their own timeout: against an API
// server that answers at once, a read succeeds (the timeout leaves it time;
// client-go's fake clientsets would not see a context already expired).
func TestLiveReaderReadsOverHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/default/pods/p" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"default","uid":"uid-1"}}`)
	}))
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := LiveReader{Client: client}.Pod("default", "p")
	if err != nil {
		t.Fatalf("Pod: %v", err)
	}
	if pod.UID != "uid-1" {
		t.Errorf("Pod: uid %q, want the server's pod", pod.UID)
	}
}
