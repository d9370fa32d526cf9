package reconciler_test

import (
	"context"
	"strings"
	"testing"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/kruisetest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

func newFixtureWith(pod *corev1.Pod, cfg reconciler.Config) *fixture {
	f := newFixture(pod)
	f.rec = reconciler.New(cfg, f.w, f.w, f.ev, f.metrics, f.clock)
	return f
}

func (f *fixture) creates() int {
	n := 0
	for _, s := range f.w.sent {
		if strings.HasPrefix(s, "crr ") {
			n++
		}
	}
	return n
}

// With --crr-retry-backoff=0 a refused CRR may be sent again at once, so
// the refusals no longer end a sync's passes by themselves: the passes are
// capped (the first, and one per kind of write whose refusal is remembered:
// CRR, swap, settle, delete, so five), the pod is looked at again soon, not
// never, and the refusals still end in a give-up Warning.
func TestRefusalPassesAreCappedPerSync(t *testing.T) {
	cfg := reconciler.DefaultConfig()
	cfg.Policy.RetryBackoff = 0
	f := newFixtureWith(jobPod(markCRR), cfg)
	crr := "crr " + decision.CRRName(f.w.pod, 1)
	for i := 0; i < 100; i++ {
		f.w.answers[crr] = append(f.w.answers[crr], kruisetest.WebhookDown())
	}
	after := f.sync(t)
	if got := f.creates(); got != 5 {
		t.Fatalf("one sync sent %d refused creates, want 5 (the first pass and one per refusal kind)", got)
	}
	if after <= 0 {
		t.Fatalf("after the capped passes: requeue %s, want a later look (a zero backoff must not mean never)", after)
	}
	for i := 0; i < 10 && after > 0; i++ {
		f.clock.Step(after)
		after = f.sync(t)
	}
	max := cfg.Policy.MaxRefusals
	if got := f.creates(); got != max || after != 0 {
		t.Fatalf("creates %d, last requeue %s; want %d (MaxRefusals) and none", got, after, max)
	}
	if len(f.ev.warnings(decision.ReasonSidecarKillGaveUp)) != 1 {
		t.Fatalf("want one SidecarKillGaveUp, got %+v", f.ev.list)
	}
}

// slowWorld answers CRR creates after the clock moved on: an API server
// under load.
type slowWorld struct {
	*world
	clock *clocktesting.FakeClock
	delay time.Duration
}

func (s slowWorld) CreateCRR(ctx context.Context, crr *kruisev1alpha1.ContainerRecreateRequest, readPodFirst bool) error {
	s.clock.Step(s.delay)
	return s.world.CreateCRR(ctx, crr, readPodFirst)
}

// A write's expectation is counted from its answer. When the answer came
// late and the cache never shows the write, the look the sync asks for is the
// one at which the expectation has timed out: the pod is decided afresh
// then, not told to wait once more. Afresh, but knowing the CRR it made:
// kruise-daemon may be stopping the sidecar under it, so it is not made
// again (crrmemory.go, madeCRR).
func TestSlowUnseenWriteIsRevisitedWhenItsExpectationTimesOut(t *testing.T) {
	f := newFixture(jobPod(markCRR))
	slow := slowWorld{world: f.w, clock: f.clock, delay: 5 * time.Second}
	f.rec = reconciler.New(reconciler.DefaultConfig(), f.w, slow, f.ev, f.metrics, f.clock)
	after := f.sync(t)
	if f.creates() != 1 {
		t.Fatalf("first sync wrote %v, want one create", f.w.sent)
	}
	f.clock.Step(after)
	f.sync(t)
	if got := testutil.ToFloat64(f.metrics.ExpectationsTimedOut); got != 1 || f.creates() != 1 {
		t.Fatalf("at the look asked for (%s later): expectations timed out %v, writes %v; want the pod decided afresh", after, got, f.w.sent)
	}
}

// An expectation that is already over when the sync ends (here a zero
// expectation timeout) still gets the pod looked at again: a requeue of zero
// would mean never, and the unseen write would be left alone.
func TestExpectationOverAtTheEndOfTheSyncStillRequeues(t *testing.T) {
	cfg := reconciler.DefaultConfig()
	cfg.ExpectationTimeout = 0
	f := newFixtureWith(jobPod(markCRR), cfg)
	after := f.sync(t)
	if f.creates() != 1 || after <= 0 {
		t.Fatalf("writes %v, requeue %s; want one create and a later look", f.w.sent, after)
	}
	f.clock.Step(after)
	f.sync(t)
	if got := testutil.ToFloat64(f.metrics.ExpectationsTimedOut); got != 1 || f.creates() != 1 {
		t.Fatalf("the unseen write was not decided afresh (%v timed out), or its CRR was made again: %v", got, f.w.sent)
	}
}
