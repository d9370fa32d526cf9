package reconciler

import (
	"errors"
	"slices"
	"testing"
	"time"
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
	} {
		q := &recordingQueue{}
		Requeue[string](q, "p", tc.after, tc.err)
		if !slices.Equal(q.calls, tc.want) {
			t.Errorf("%s: %v, want %v", tc.desc, q.calls, tc.want)
		}
	}
}
