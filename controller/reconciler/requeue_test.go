package reconciler

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

type recordingQueue struct{ calls []string }

func (q *recordingQueue) AddRateLimited(k string) { q.calls = append(q.calls, "AddRateLimited "+k) }
func (q *recordingQueue) AddAfter(k string, d time.Duration) {
	q.calls = append(q.calls, "AddAfter "+k+" "+d.String())
}
func (q *recordingQueue) Forget(k string) { q.calls = append(q.calls, "Forget "+k) }

func TestRequeue(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		after time.Duration
		err   error
		want  []string
	}{
		{"a failed sync is retried with back-off", 0, errors.New("conflict"), []string{"AddRateLimited p"}},
		{"an error wins over a wait", time.Minute, errors.New("timeout"), []string{"AddRateLimited p"}},
		{"a wait resets the back-off and syncs later", 10 * time.Second, nil, []string{"Forget p", "AddAfter p 10s"}},
		{"a finished sync resets the back-off", 0, nil, []string{"Forget p"}},
		{"a 429 the client gave up on waits the server's Retry-After", 0,
			fmt.Errorf("create CRR: %w", apierrors.NewTooManyRequests("try later", 3)), []string{"AddAfter p 3s"}},
		{"a 429 without Retry-After backs off as any error", 0,
			apierrors.NewTooManyRequests("try later", 0), []string{"AddRateLimited p"}},
		{"a server timeout with Retry-After waits it", 0,
			apierrors.NewServerTimeout(schema.GroupResource{Resource: "pods"}, "patch", 2), []string{"AddAfter p 2s"}},
	} {
		q := &recordingQueue{}
		Requeue[string](q, "p", tc.after, tc.err)
		if !slices.Equal(q.calls, tc.want) {
			t.Errorf("%s: %v, want %v", tc.desc, q.calls, tc.want)
		}
	}
}

// A server timeout whose Retry-After is zero suggests a delay of zero: it is
// backed off as any error, not requeued at once (a zero AddAfter is a hot
// loop).
func TestRequeueOfAServerTimeoutWithoutRetryAfter(t *testing.T) {
	err := apierrors.NewServerTimeout(schema.GroupResource{Resource: "pods"}, "patch", 0)
	if s, ok := apierrors.SuggestsClientDelay(err); !ok || s != 0 {
		t.Fatalf("SuggestsClientDelay = %d, %v; the case needs a suggested delay of zero", s, ok)
	}
	q := &recordingQueue{}
	Requeue[string](q, "p", 0, err)
	if want := []string{"AddRateLimited p"}; !slices.Equal(q.calls, want) {
		t.Errorf("%v, want %v", q.calls, want)
	}
}
