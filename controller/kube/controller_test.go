package kube

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// logLines is a klog logger's output, kept for a test to read.
type logLines struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// count says how many lines contain every one of parts.
func (l *logLines) count(parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range strings.Split(l.buf.String(), "\n") {
		all := line != ""
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			n++
		}
	}
	return n
}

func (l *logLines) context(ctx context.Context) context.Context {
	return klog.NewContext(ctx, textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(l))))
}

// recordingSyncer records the keys it is asked to sync; a key's first sync
// fails with the error given for it.
type recordingSyncer struct {
	mu     sync.Mutex
	synced map[cache.ObjectName]int
	fail   map[cache.ObjectName]error
}

func (s *recordingSyncer) Sync(_ context.Context, key cache.ObjectName) (time.Duration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.synced[key]++
	if err, ok := s.fail[key]; ok {
		delete(s.fail, key)
		return 0, err
	}
	return 0, nil
}

func (s *recordingSyncer) count(key cache.ObjectName) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.synced[key]
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not so after 30 s: %s", what)
		}
	}
}

// The controller end to end over fake clientsets: a pod in the cache is
// synced; a failed sync is logged and retried; an event of one of our CRRs
// wakes its pod; when the context ends, Run returns.
func TestControllerSyncsPodsFromInformerEvents(t *testing.T) {
	pod := podtest.Pod("p").Namespace("default").UID("uid-p").Node("normal").
		Container("main", podtest.Exited(0, podtest.Epoch)).Container("log", podtest.Env(decision.EnvTerminate, "true")).Build()
	scheme := runtime.NewScheme()
	metav1.AddMetaToScheme(scheme)
	kruise := kruisefake.NewSimpleClientset()
	caches, err := NewCaches(fake.NewClientset(pod), metadatafake.NewSimpleMetadataClient(scheme), kruise, true)
	if err != nil {
		t.Fatal(err)
	}
	key := cache.ObjectName{Namespace: "default", Name: "p"}
	syncer := &recordingSyncer{synced: map[cache.ObjectName]int{}, fail: map[cache.ObjectName]error{key: errors.New("the API server is away")}}
	ctrl, err := NewController(caches, syncer)
	if err != nil {
		t.Fatalf("NewController: %v", err)
	}
	var logs logLines
	ctx, cancel := context.WithCancel(logs.context(context.Background()))
	defer cancel()
	caches.Start(ctx.Done())
	ran := make(chan error, 1)
	go func() { ran <- ctrl.Run(ctx, 2) }()

	eventually(t, "the pod synced, failed and synced again", func() bool { return syncer.count(key) >= 2 })
	if n := logs.count("Sync failed; will retry", "the API server is away", `pod="default/p"`); n != 1 {
		t.Errorf("lines logging the failed sync: %d, want 1:\n%s", n, logs.buf.String())
	}
	if n := logs.count("Sync failed"); n != 1 {
		t.Errorf("lines saying a sync failed: %d, want 1 (only the one that did)", n)
	}

	before := syncer.count(key)
	crr := &kruisev1alpha1.ContainerRecreateRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p-st1",
			Labels: map[string]string{reconciler.LabelManagedBy: reconciler.ManagedByValue, reconciler.LabelPodUID: "uid-p"}},
		Spec: kruisev1alpha1.ContainerRecreateRequestSpec{PodName: "p"}}
	if _, err := kruise.AppsV1alpha1().ContainerRecreateRequests("default").Create(ctx, crr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the CRR's pod synced", func() bool { return syncer.count(key) > before })

	cancel()
	select {
	case err := <-ran:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return 30 s after its context ended")
	}
}

// A CRR's event wakes its pod only when the cache holds the pod and the
// decision considers it (reconciler.CRREventMatters), answered from the
// cache's bit without decoding the pod.
func TestACRREventWakesOnlyAPodTheDecisionConsiders(t *testing.T) {
	marked := jobPod("marked", podtest.Env(decision.EnvTerminate, "true")).Build()
	unmarked := jobPod("unmarked").Build()
	caches := startedCaches(t, fake.NewClientset(marked, unmarked), kruisefake.NewSimpleClientset(), true)
	ctrl, err := NewController(caches, &recordingSyncer{synced: map[cache.ObjectName]int{}})
	if err != nil {
		t.Fatal(err)
	}
	for pod, want := range map[string]bool{"marked": true, "unmarked": false, "gone": false} {
		crr, err := TrimCRR(&kruisev1alpha1.ContainerRecreateRequest{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: pod + "-st1"},
			Spec:       kruisev1alpha1.ContainerRecreateRequestSpec{PodName: pod}})
		if err != nil {
			t.Fatal(err)
		}
		if got := ctrl.enqueueCRRPod(crr); got != want {
			t.Errorf("a CRR of pod %q queued it: %v, want %v", pod, got, want)
		}
	}
	if got := ctrl.Queued(); got != 1 {
		t.Errorf("%d pods queued, want 1 (the marked one)", got)
	}
}
