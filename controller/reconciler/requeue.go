package reconciler

import "time"

// A failing pod sync is retried with a back-off per pod from RetryBaseDelay,
// doubling to at most RetryMaxDelay. Not client-go's default, which also
// lets all retries together through at 10 per second and one pod's back-off
// grow to 1,000 s: after an API-server outage every pod in flight has failed,
// and that shared cap made a 1,000-pod burst wait over a minute once the API
// server was back. The client's QPS limit (--kube-api-qps) already protects
// the API server from a retry storm.
const (
	RetryBaseDelay = 5 * time.Millisecond
	RetryMaxDelay  = 30 * time.Second
)

// Queue is the part of a rate-limited workqueue that a sync's result acts on.
type Queue[K comparable] interface {
	AddRateLimited(key K)
	AddAfter(key K, after time.Duration)
	Forget(key K)
}

// Requeue applies what Sync returned to the key: after an error, a retry
// with back-off; with a wait, a fresh back-off and a sync after it; else the
// back-off is reset. The controller and the simulator both call it.
func Requeue[K comparable](q Queue[K], key K, after time.Duration, err error) {
	switch {
	case err != nil:
		q.AddRateLimited(key)
	case after > 0:
		q.Forget(key)
		q.AddAfter(key, after)
	default:
		q.Forget(key)
	}
}
