package bench

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// timelineSecond is one second of a burst, counted from its first main exit:
// what the harness wrote and what it saw. A pause in the terminator's actions
// that lines up with a gap in the exits written is the harness's (or the API
// server's, which both wait on); one with exits still being written is the
// terminator's or its watch's.
type timelineSecond struct {
	Exits, Acted, Done int
	// Worst is the slowest action on a pod whose main exited in this second,
	// in seconds; NaN while none of them was acted on.
	Worst float64
}

// timeline buckets a burst's exits, actions and finished pods by the second
// after start they happened in.
func timeline(start time.Time, exitAt, actAt, doneAt map[string]time.Time) []timelineSecond {
	var secs []timelineSecond
	at := func(t time.Time) *timelineSecond {
		i := int(t.Sub(start) / time.Second)
		if i < 0 {
			i = 0
		}
		for len(secs) <= i {
			secs = append(secs, timelineSecond{Worst: math.NaN()})
		}
		return &secs[i]
	}
	for name, exit := range exitAt {
		at(exit).Exits++
		if act, ok := actAt[name]; ok {
			s := at(exit)
			if d := act.Sub(exit).Seconds(); math.IsNaN(s.Worst) || d > s.Worst {
				s.Worst = d
			}
		}
	}
	for _, act := range actAt {
		at(act).Acted++
	}
	for _, done := range doneAt {
		at(done).Done++
	}
	return secs
}

// timelineTSV writes a timeline as tab-separated columns, one line a second.
func timelineTSV(secs []timelineSecond) string {
	var b strings.Builder
	b.WriteString("second\texits_written\tactions_seen\tpods_succeeded\tslowest_action_of_these_exits_s\n")
	for i, s := range secs {
		worst := "-"
		if !math.IsNaN(s.Worst) {
			worst = fmt.Sprintf("%.2f", s.Worst)
		}
		fmt.Fprintf(&b, "%d\t%d\t%d\t%d\t%s\n", i, s.Exits, s.Acted, s.Done, worst)
	}
	return b.String()
}
