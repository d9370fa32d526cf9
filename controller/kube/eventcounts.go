package kube

import "github.com/prometheus/client_golang/prometheus"

// informerEvents counts the informers' events by object kind, event and
// what the handler did with it: queued its pod's key, or dropped it (the
// reconciler's filters). It says where a pod's syncs come from, and how
// much the filters save; the workqueue's own metrics count the syncs.
// Each series is resolved once, so a count costs one atomic add.
type informerEvents struct {
	vec *prometheus.CounterVec
	// [kind][event][queued]
	counts [2][3][2]prometheus.Counter
}

const (
	kindPod = iota
	kindCRR
)

const (
	eventAdd = iota
	eventUpdate
	eventDelete
)

func newInformerEvents() *informerEvents {
	e := &informerEvents{vec: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sidecar_terminator_informer_events_total",
		Help: "Informer events by object kind (pod, crr), event (add, update, delete) and result: queued a pod's sync, or filtered (changes nothing a sync reads).",
	}, []string{"kind", "event", "result"})}
	for k, kind := range []string{"pod", "crr"} {
		for ev, event := range []string{"add", "update", "delete"} {
			e.counts[k][ev][0] = e.vec.WithLabelValues(kind, event, "filtered")
			e.counts[k][ev][1] = e.vec.WithLabelValues(kind, event, "queued")
		}
	}
	return e
}

func (e *informerEvents) count(kind, event int, queued bool) {
	q := 0
	if queued {
		q = 1
	}
	e.counts[kind][event][q].Inc()
}
