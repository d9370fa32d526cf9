package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
)

// The providers reach client-go and the workqueue: a real request and a
// real queue show up on the registry.
func TestLibraryMetricsCountRequestsAndQueue(t *testing.T) {
	reg := prometheus.NewRegistry()
	registerLibraryMetrics(reg)

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":404,"reason":"NotFound"}`, http.StatusNotFound)
	}))
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, QPS: 100, Burst: 100})
	if err != nil {
		t.Fatal(err)
	}
	host := srv.Listener.Addr().String()
	before := testutil.ToFloat64(requestsTotal.WithLabelValues("404", "GET", host))
	if _, err := client.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{}); err == nil {
		t.Fatal("the test server answers 404")
	}
	if got := testutil.ToFloat64(requestsTotal.WithLabelValues("404", "GET", host)) - before; got != 1 {
		t.Errorf("rest_client_requests_total{code=404,method=GET} rose by %v, want 1", got)
	}
	if n := testutil.CollectAndCount(rateLimiterDuration); n == 0 {
		t.Errorf("no rest_client_rate_limiter_duration_seconds series after a request")
	}

	q := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: "library-metrics-test"})
	defer q.ShutDown()
	q.Add("a")
	q.Add("b")
	if got := testutil.ToFloat64(queueDepth.WithLabelValues("library-metrics-test")); got != 2 {
		t.Errorf("workqueue_depth = %v, want 2", got)
	}
	item, _ := q.Get()
	q.Done(item)
	if got := testutil.ToFloat64(queueAdds.WithLabelValues("library-metrics-test")); got != 2 {
		t.Errorf("workqueue_adds_total = %v, want 2", got)
	}
	if got := testutil.ToFloat64(queueDepth.WithLabelValues("library-metrics-test")); got != 1 {
		t.Errorf("workqueue_depth after one Get = %v, want 1", got)
	}
	names, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"rest_client_requests_total": false, "workqueue_queue_duration_seconds": false, "workqueue_work_duration_seconds": false}
	for _, mf := range names {
		if _, ok := want[mf.GetName()]; ok {
			want[mf.GetName()] = true
		}
	}
	for name, found := range want {
		if !found {
			t.Errorf("%s not on the registry", name)
		}
	}
}

// The runtime's collectors give the scheduler's latencies beside the
// memory statistics the bench and the docs read.
func TestRuntimeCollectorsGiveTheSchedulersLatencies(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(runtimeCollectors()...)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, f := range families {
		found[f.GetName()] = true
		if f.GetName() == "go_sched_latencies_seconds" && len(f.GetMetric()) > 0 && len(f.GetMetric()[0].GetHistogram().GetBucket()) == 0 {
			t.Errorf("go_sched_latencies_seconds has no buckets")
		}
	}
	for _, name := range []string{"go_sched_latencies_seconds", "go_memstats_heap_alloc_bytes", "process_resident_memory_bytes"} {
		if !found[name] {
			t.Errorf("the runtime's collectors give no %s", name)
		}
	}
}
