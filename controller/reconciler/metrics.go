package reconciler

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// Metrics are the controller's Prometheus metrics.
type Metrics struct {
	Actions     *prometheus.CounterVec
	Latency     *prometheus.HistogramVec
	FailedKills *prometheus.CounterVec
	Warnings    *prometheus.CounterVec
	Decisions   *prometheus.CounterVec
	PodsTracked prometheus.Gauge
	// OldestWaiting reads the reconciler that last called watchWaiting.
	OldestWaiting prometheus.GaugeFunc
	waiting       atomic.Pointer[func() float64]
	// Refusals counts writes the cluster refused, by method and class
	// (permanent or transient); each is also an action with result error.
	Refusals *prometheus.CounterVec
	// ExpectationsTimedOut counts writes whose effect the cache never showed
	// within the expectation timeout.
	ExpectationsTimedOut prometheus.Counter
	// SecondTerminatorPods counts pods on which OpenKruise's own
	// SidecarTerminator was seen acting too (second.go).
	SecondTerminatorPods prometheus.Counter
	// JobReads counts the live reads of a pod's owning Job (jobverdict.go),
	// by what the Job's podFailurePolicy meant for the stop.
	JobReads *prometheus.CounterVec
}

// Result labels of the actions counter.
const (
	ResultSuccess = "success"
	ResultError   = "error"
	// ResultAlreadyDone: the write found its work done (the CRR existed),
	// as after a controller restart.
	ResultAlreadyDone = "already_done"
	// ResultStale: a JSON-patch test failed, the pod changed under us.
	ResultStale = "stale"
)

// NewMetrics makes the metrics and registers them with reg (none when nil).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidecar_terminator_actions_total",
			Help: "Writes made to stop sidecars or settle a pod's phase, by method and result.",
		}, []string{"method", "result"}),
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sidecar_terminator_action_latency_seconds",
			Help:    "Time from the last main container's exit (as the kubelet reports it, to the second) to the action.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300},
		}, []string{"method"}),
		FailedKills: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidecar_terminator_failed_kills_total",
			Help: "Sidecars still running after the ContainerRecreateRequest sent to stop them ended or passed its deadline.",
		}, []string{"method"}),
		Warnings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidecar_terminator_warnings_total",
			Help: "Warning events emitted, by reason.",
		}, []string{"reason"}),
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidecar_terminator_decisions_total",
			Help: "Pod syncs, by verdict.",
		}, []string{"verdict"}),
		PodsTracked: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sidecar_terminator_pods_tracked",
			Help: "Job-type pods with marked sidecars that are not finished yet.",
		}),
		Refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidecar_terminator_refused_writes_total",
			Help: "Writes refused by the cluster (a webhook, an admission policy, the API server), by method and class: permanent or transient.",
		}, []string{"method", "class"}),
		ExpectationsTimedOut: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sidecar_terminator_expectations_timed_out_total",
			Help: "Writes whose effect the informer cache did not show within the expectation timeout; the pod was decided afresh.",
		}),
		SecondTerminatorPods: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sidecar_terminator_second_terminator_pods_total",
			Help: "Pods on which OpenKruise's own SidecarTerminator was seen acting too; sidecar-terminator yielded to it.",
		}),
		JobReads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sidecar_terminator_job_reads_total",
			Help: "Live reads of a failed pod's owning Job before a ContainerRecreateRequest, by result: settle (a podFailurePolicy rule could read the stop's exit code; the phase was settled first), no_change, not_found, error.",
		}, []string{"result"}),
	}
	m.OldestWaiting = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sidecar_terminator_oldest_waiting_sidecar_seconds",
		Help: "Seconds since the main containers finished, for the pod whose sidecars have run longest after them; 0 when no pod waits.",
	}, func() float64 {
		if f := m.waiting.Load(); f != nil {
			return (*f)()
		}
		return 0
	})
	m.initialise()
	if reg != nil {
		reg.MustRegister(m.Actions, m.Latency, m.FailedKills, m.Warnings, m.Decisions, m.PodsTracked, m.OldestWaiting)
		reg.MustRegister(m.Refusals, m.ExpectationsTimedOut, m.SecondTerminatorPods, m.JobReads)
	}
	return m
}

// Label values known in advance. Every series of them exists at zero from
// the start, so that an alert on a counter's increase sees its first
// increment (a series that appears at 1 has no increase) and a query for it
// returns 0 rather than no data.
var (
	actionMethods = []decision.ActionKind{decision.ActionCreateCRR, decision.ActionSwapImage, decision.ActionSettlePhase}
	actionResults = []string{ResultSuccess, ResultError, ResultAlreadyDone, ResultStale}
	// killMethods are the actions that stop sidecars (settling a phase stops
	// nothing).
	killMethods = []decision.ActionKind{decision.ActionCreateCRR, decision.ActionSwapImage}
)

func (m *Metrics) initialise() {
	for _, method := range actionMethods {
		for _, result := range actionResults {
			m.Actions.WithLabelValues(string(method), result)
		}
		m.Latency.WithLabelValues(string(method))
	}
	for _, method := range killMethods {
		m.FailedKills.WithLabelValues(string(method))
	}
	for _, method := range actionMethods {
		for _, class := range []string{"permanent", "transient"} {
			m.Refusals.WithLabelValues(string(method), class)
		}
	}
	for _, reason := range decision.WarningReasons() {
		m.Warnings.WithLabelValues(reason)
	}
	for _, verdict := range decision.Verdicts() {
		m.Decisions.WithLabelValues(string(verdict))
	}
	for _, result := range jobReadResults {
		m.JobReads.WithLabelValues(result)
	}
}
