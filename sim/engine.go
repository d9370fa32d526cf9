package sim

import (
	"container/heap"
	"context"
	"math/rand/v2"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"
)

// Epoch is virtual time zero.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// event is one thing that happens at a virtual time. seq breaks ties in the
// order events were scheduled, so the run never depends on heap internals.
type event struct {
	at  time.Time
	seq uint64
	fn  func()
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = event{}
	*h = old[:len(old)-1]
	return e
}

// Sim is one run: one scenario, one seed. Everything it does happens in
// Run, on one goroutine, in virtual time; every random choice comes from rng.
type Sim struct {
	sc    Scenario
	seed  uint64
	opts  Options
	rng   *rand.Rand
	clock *clocktesting.FakeClock
	ctx   context.Context

	events eventHeap
	seq    uint64
	step   uint64
	// maxInstant is the most steps taken at one virtual instant so far.
	maxInstant uint64

	// loseEvents: the watches lose the events delivered now
	// (Faults.WriteBackUnseen).
	loseEvents bool

	world *World
	ctrls []*controller
	check *Checker
	trace *Trace
	stats *Stats
}

// New prepares a run of the scenario with the seed.
func New(sc Scenario, seed uint64, opts Options) *Sim {
	if opts.Pods > 0 {
		sc.Pods = opts.Pods
	}
	if opts.WriteCost > 0 {
		sc.WriteCost = opts.WriteCost
	}
	sc.FreeWrites = sc.FreeWrites || opts.FreeWrites
	sc = sc.withDefaults()
	s := &Sim{
		sc: sc, seed: seed, opts: opts,
		rng:   rand.New(rand.NewPCG(seed, 0x5eed)),
		clock: clocktesting.NewFakeClock(Epoch),
		// The reconciler logs every decision; at 10^5 pods that is noise.
		ctx: klog.NewContext(context.Background(), logr.Discard()),
	}
	s.trace = newTrace(s, opts.TraceOut, opts.TracePod)
	s.stats = newStats()
	s.check = newChecker(s)
	s.world = newWorld(s)
	return s
}

// Step bounds: a run that takes more steps than these is a liveness
// violation, never a hang. Within one virtual instant the simulator may only do
// a bounded amount of work (every sync costs virtual time, so only a loop of
// zero-delay events can pile up there); over a whole run the steps grow with
// the pods. Both defaults are far above what any scenario needs (TestScenarios
// checks a tenth of each) and small enough that hitting them takes
// seconds, not the package timeout.
const (
	defaultStepsPerInstant = 10000
	defaultStepsPerPod     = 2000
	defaultStepsBase       = 200000
)

func (s *Sim) stepBounds() (total, perInstant uint64) {
	total, perInstant = s.opts.MaxSteps, s.opts.MaxStepsPerInstant
	if total == 0 {
		total = defaultStepsBase + defaultStepsPerPod*uint64(s.sc.Pods)
	}
	if perInstant == 0 {
		perInstant = defaultStepsPerInstant + 2*uint64(s.sc.Pods)
	}
	return total, perInstant
}

func (s *Sim) now() time.Time { return s.clock.Now() }

// at schedules fn at t (never in the past).
func (s *Sim) at(t time.Time, fn func()) {
	if t.Before(s.now()) {
		t = s.now()
	}
	s.seq++
	heap.Push(&s.events, event{at: t, seq: s.seq, fn: fn})
}

func (s *Sim) after(d time.Duration, fn func()) { s.at(s.now().Add(d), fn) }

// jitter returns d scaled by a random factor in [1-f, 1+f].
func (s *Sim) jitter(d time.Duration, f float64) time.Duration {
	if d <= 0 || f <= 0 {
		return d
	}
	return time.Duration(float64(d) * (1 - f + 2*f*s.rng.Float64()))
}

func (s *Sim) chance(p float64) bool { return p > 0 && s.rng.Float64() < p }

// Run plays the scenario until every pod is settled and the world is quiet,
// a violation stops it, or the time limit passes.
func (s *Sim) Run() *Result {
	wallStart := time.Now() // report only: never read by the simulation
	s.world.setup()
	limit := Epoch.Add(s.sc.Arrival + s.sc.Bound*3 + 30*time.Minute)
	maxSteps, maxInstant := s.stepBounds()
	var quietSince, instant time.Time
	var instantSteps uint64
	for len(s.events) > 0 && s.check.violation == nil {
		next := s.events[0].at
		if next.After(limit) {
			break
		}
		if next.Equal(instant) {
			instantSteps++
		} else {
			instant, instantSteps = next, 1
		}
		if instantSteps > s.maxInstant {
			s.maxInstant = instantSteps
		}
		if instantSteps > maxInstant {
			s.check.runaway("%d steps at virtual time %s without time advancing (bound %d): something reschedules itself at the same instant",
				instantSteps, fmtDur(next.Sub(Epoch)), maxInstant)
			break
		}
		if s.step >= maxSteps {
			s.check.runaway("%d steps by virtual time %s (bound %d for %d pods): the run does not come to rest",
				s.step, fmtDur(next.Sub(Epoch)), maxSteps, s.sc.Pods)
			break
		}
		if !quietSince.IsZero() && next.After(quietSince.Add(s.sc.Quiesce)) {
			s.clock.SetTime(quietSince.Add(s.sc.Quiesce))
			break
		}
		ev := heap.Pop(&s.events).(event)
		s.clock.SetTime(ev.at)
		s.step++
		ev.fn()
		if v := s.check.violation; v != nil && v.Trace == nil {
			// Taken after the step, so the write that broke the rule is in it.
			v.Trace = s.trace.about(v.Pod)
		}
		switch {
		case s.check.unsettled > 0 || s.world.created < s.sc.Pods:
			quietSince = time.Time{}
		case quietSince.IsZero():
			quietSince = s.now()
		}
	}
	if s.check.violation == nil {
		s.check.final()
	}
	return s.result(time.Since(wallStart))
}
