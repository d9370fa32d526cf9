package app

import (
	"context"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/workqueue"
)

// Metrics of the libraries the controller runs on: client-go's requests
// (what the API server answered, how long, and how long each request waited
// for the client's own QPS limiter) and the workqueue (depth, time queued,
// time worked). With them a slow termination says where its time went: in
// the queue, in the limiter (--kube-api-qps) or at the API server.
//
// Both libraries take one provider per process, so the collectors are
// package-level and registered on every registry that asks.
var (
	requestsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rest_client_requests_total",
		Help: "API server requests, by status code, method and host.",
	}, []string{"code", "method", "host"})
	requestDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rest_client_request_duration_seconds",
		Help:    "API server request latency, by verb and host.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	}, []string{"verb", "host"})
	rateLimiterDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "rest_client_rate_limiter_duration_seconds",
		Help:    "Time requests waited for the client's QPS limiter (--kube-api-qps, --kube-api-burst), by verb and host.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	}, []string{"verb", "host"})

	queueDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "workqueue_depth", Help: "Items waiting in the workqueue.",
	}, []string{"name"})
	queueAdds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "workqueue_adds_total", Help: "Items added to the workqueue.",
	}, []string{"name"})
	queueLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "workqueue_queue_duration_seconds", Help: "Time an item waits in the workqueue before a worker takes it.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	}, []string{"name"})
	queueWork = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "workqueue_work_duration_seconds", Help: "Time a worker spends on one item (one pod sync).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	}, []string{"name"})
	queueUnfinished = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "workqueue_unfinished_work_seconds", Help: "Seconds of work in progress that no worker has finished.",
	}, []string{"name"})
	queueLongest = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "workqueue_longest_running_processor_seconds", Help: "Seconds the longest running worker has been on its item.",
	}, []string{"name"})
	queueRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "workqueue_retries_total", Help: "Items requeued with back-off after a failed sync.",
	}, []string{"name"})

	setLibraryProviders sync.Once
)

// registerLibraryMetrics hands the providers to client-go and the workqueue
// (once per process, before any client or queue exists) and adds their
// collectors to reg.
func registerLibraryMetrics(reg prometheus.Registerer) {
	setLibraryProviders.Do(func() {
		clientmetrics.Register(clientmetrics.RegisterOpts{
			RequestLatency:     latencyMetric{requestDuration},
			RateLimiterLatency: latencyMetric{rateLimiterDuration},
			RequestResult:      resultMetric{},
		})
		workqueue.SetProvider(queueMetrics{})
	})
	reg.MustRegister(requestsTotal, requestDuration, rateLimiterDuration,
		queueDepth, queueAdds, queueLatency, queueWork, queueUnfinished, queueLongest, queueRetries)
}

// latencyMetric labels by verb and host only: the URL path holds object
// names and would make one series per pod.
type latencyMetric struct{ h *prometheus.HistogramVec }

func (m latencyMetric) Observe(_ context.Context, verb string, u url.URL, d time.Duration) {
	m.h.WithLabelValues(verb, u.Host).Observe(d.Seconds())
}

type resultMetric struct{}

func (resultMetric) Increment(_ context.Context, code, method, host string) {
	requestsTotal.WithLabelValues(code, method, host).Inc()
}

type queueMetrics struct{}

func (queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return queueDepth.WithLabelValues(name)
}
func (queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return queueAdds.WithLabelValues(name)
}
func (queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return queueLatency.WithLabelValues(name)
}
func (queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return queueWork.WithLabelValues(name)
}
func (queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return queueUnfinished.WithLabelValues(name)
}
func (queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return queueLongest.WithLabelValues(name)
}
func (queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return queueRetries.WithLabelValues(name)
}

// runtimeCollectors are the Go runtime's and the process's collectors. The
// Go collector adds the scheduler's metrics (go_sched_*) to its defaults:
// go_sched_latencies_seconds, how long goroutines waited runnable before
// they ran, tells a request slow at the API server from one whose answer
// waited for the controller's own CPU (rest_client_request_duration_seconds
// holds both).
func runtimeCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.MetricsScheduler)),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
}
