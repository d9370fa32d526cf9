package bench

import (
	"sort"
	"time"
)

// owned counts the k-th terminator's pods.
func (b *burst) owned(k int) int {
	n := 0
	for _, o := range b.owner {
		if o == k {
			n++
		}
	}
	return n
}

// summarize fills res from the k-th terminator's pods.
func (b *burst) summarize(res *BurstResult, start time.Time, k int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var lat []float64
	var last time.Time
	mine := func(all map[string]time.Time) map[string]time.Time {
		out := map[string]time.Time{}
		for name, at := range all {
			if b.owner[name] == k {
				out[name] = at
			}
		}
		return out
	}
	exitAt := mine(b.exitAt)
	for name, exit := range exitAt {
		if b.deleted[name] {
			continue
		}
		act, ok := b.actAt[name]
		if !ok {
			if res.NotActedOn == 0 {
				res.FirstNotActedOn = name
			}
			res.NotActedOn++
			continue
		}
		lat = append(lat, act.Sub(exit).Seconds())
		if d := b.doneAt[name]; d.After(last) {
			last = d
		}
	}
	sort.Float64s(lat)
	res.Latencies = lat
	res.timeline = timeline(start, exitAt, mine(b.actAt), mine(b.doneAt))
	res.P50, res.P90, res.P99, res.Max = quantile(lat, 0.5), quantile(lat, 0.9), quantile(lat, 0.99), quantile(lat, 1)
	if !last.IsZero() {
		res.AllSucceededSeconds = last.Sub(start).Seconds()
	}
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}
