package sim

import (
	"strings"
	"testing"
	"time"
)

// A loop of events that reschedule themselves at the same virtual instant
// would spin forever (virtual time never reaches the run's limit); the step
// bound turns it into a liveness violation that can be replayed.
func TestZeroDelayLoopIsALivenessViolation(t *testing.T) {
	sc, err := Lookup("job-never-crr")
	if err != nil {
		t.Fatal(err)
	}
	s := New(sc, 5, Options{Pods: 10})
	var spin func()
	spin = func() {
		s.trace.add("never-crr-loop", "spin")
		s.after(0, spin)
	}
	s.at(Epoch.Add(30*time.Second), spin)
	v := s.Run().Violation
	if v == nil {
		t.Fatal("a zero-delay loop ended without a violation")
	}
	if v.Kind != "liveness" || !strings.Contains(v.Message, "without time advancing") {
		t.Errorf("want a liveness violation about time not advancing, got %s: %s", v.Kind, v.Message)
	}
	if v.At != 30*time.Second || v.Pod != "never-crr-loop" {
		t.Errorf("violation at %s on %q, want at 30s on the looping subject", v.At, v.Pod)
	}
	if !strings.Contains(v.String(), "replay: go run ./sim/cmd/sim --scenario job-never-crr --seed 5 --pods 10") {
		t.Errorf("violation has no replay command:\n%s", v)
	}
}

// A loop that does advance virtual time, in steps too small to reach the
// run's time limit soon, stops at the overall step bound.
func TestRunawayRunIsALivenessViolation(t *testing.T) {
	sc, err := Lookup("job-never-crr")
	if err != nil {
		t.Fatal(err)
	}
	s := New(sc, 2, Options{Pods: 10, MaxSteps: 200000})
	var tick func()
	tick = func() { s.after(time.Microsecond, tick) }
	s.at(Epoch, tick)
	r := s.Run()
	v := r.Violation
	if v == nil {
		t.Fatal("a runaway run ended without a violation")
	}
	if v.Kind != "liveness" || !strings.Contains(v.Message, "does not come to rest") {
		t.Errorf("want a liveness violation about the run not coming to rest, got %s: %s", v.Kind, v.Message)
	}
	if r.Steps != 200000 {
		t.Errorf("run took %d steps, want it stopped at the bound 200000", r.Steps)
	}
	if !strings.Contains(v.String(), "--scenario job-never-crr --seed 2 --pods 10") {
		t.Errorf("violation has no replay command:\n%s", v)
	}
}
