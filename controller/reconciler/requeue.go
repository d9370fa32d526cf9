package reconciler

import (
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// A failing pod sync is retried with a back-off per pod from RetryBaseDelay,
// doubling to at most RetryMaxDelay. Not client-go's default, which also
// lets all retries together through at 10 per second and one pod's back-off
// grow to 1,000 s: after an API-server outage every pod in flight has failed,
// and that shared cap made a 1,000-pod burst wait over a minute once the API
// server was back. What keeps retries from becoming a storm is that each
// pod's back-off doubles on its own and that only --workers syncs run at
// once; and when the API server sheds load (Priority and Fairness: 429 with
// Retry-After), its own delay, not the back-off, sets when the pod is next
// tried (see Requeue).
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
// with back-off, or after the delay the API server asked for; with a wait, a
// fresh back-off and a sync after it; else the back-off is reset. The
// controller and the simulator both call it.
//
// The server's delay: client-go already answers a 429 (or a 5xx) carrying
// Retry-After by sleeping that long and resending, up to 10 times per request
// (k8s.io/client-go@v0.35.4 rest/request.go: Request.request, maxRetries 10;
// rest/with_retry.go: IsNextRetry, checkWait). Only when those are spent
// does the error reach the sync, still carrying Retry-After
// (apierrors.SuggestsClientDelay). The pod then waits that long again rather
// than the back-off's 5 ms: at most one request per worker per Retry-After
// reaches a server that is shedding load, and no pod is given up on.
func Requeue[K comparable](q Queue[K], key K, after time.Duration, err error) {
	if s, ok := apierrors.SuggestsClientDelay(err); ok && s > 0 {
		q.AddAfter(key, time.Duration(s)*time.Second)
		return
	}
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
