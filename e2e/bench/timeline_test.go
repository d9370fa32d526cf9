package bench

import (
	"strings"
	"testing"
	"time"
)

func TestTheTimelineShowsAPauseInActionsBesideExitsStillWritten(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	s := func(f float64) time.Time { return t0.Add(time.Duration(f * float64(time.Second))) }
	exitAt := map[string]time.Time{"a": s(0.1), "b": s(0.5), "c": s(1.2), "d": s(3.9)}
	// a and b are acted on at once; c waits through seconds 2 and 3; d is never acted on.
	actAt := map[string]time.Time{"a": s(0.3), "b": s(0.6), "c": s(4.1)}
	doneAt := map[string]time.Time{"a": s(0.9), "b": s(1.1), "c": s(4.5)}

	got := timelineTSV(timeline(t0, exitAt, actAt, doneAt))
	want := strings.Join([]string{
		"second\texits_written\tactions_seen\tpods_succeeded\tslowest_action_of_these_exits_s",
		"0\t2\t2\t1\t0.20",
		"1\t1\t0\t1\t2.90",
		"2\t0\t0\t0\t-",
		"3\t1\t0\t0\t-",
		"4\t0\t1\t1\t-",
	}, "\n") + "\n"
	if got != want {
		t.Errorf("timeline:\n%s\nwant:\n%s", got, want)
	}
}
