package decision

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// refusalWait takes the policy's bounds, and the defaults where the policy
// leaves one unset (zero): a transient refusal is given up after
// MaxRefusals, and its backoff doubles from RetryBackoff up to
// RefusalBackoffMax.
func TestRefusalWaitUsesThePolicysBoundsOrTheDefaults(t *testing.T) {
	def := DefaultPolicy()
	now := time.Unix(1_000_000, 0)
	refused := func(count int) *Refusal { return &Refusal{Kind: ActionCreateCRR, Count: count, At: now} }
	for _, tc := range []struct {
		name   string
		policy Policy
		count  int
		wait   time.Duration
		gaveUp bool
	}{
		{"unset MaxRefusals: the default's", Policy{RetryBackoff: time.Second}, 1, time.Second, false},
		{"unset MaxRefusals: given up at the default", Policy{RetryBackoff: time.Second}, def.MaxRefusals, 0, true},
		{"MaxRefusals 2: given up at 2", Policy{RetryBackoff: time.Second, MaxRefusals: 2}, 2, 0, true},
		{"unset RefusalBackoffMax: doubling up to the default's", Policy{RetryBackoff: time.Minute, MaxRefusals: 100}, 6, def.RefusalBackoffMax, false},
		{"RefusalBackoffMax 3m: capped there", Policy{RetryBackoff: time.Minute, MaxRefusals: 100, RefusalBackoffMax: 3 * time.Minute}, 6, 3 * time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wait, gaveUp := refusalWait(refused(tc.count), tc.policy, now)
			if wait != tc.wait || gaveUp != tc.gaveUp {
				t.Errorf("refusalWait = %s, %v; want %s, %v", wait, gaveUp, tc.wait, tc.gaveUp)
			}
		})
	}
}

// The Warning for a refused kill names the write that was refused.
func TestRefusedKillNamesTheWrite(t *testing.T) {
	for kind, want := range map[ActionKind]string{ActionSwapImage: "the image swap that stops", ActionCreateCRR: "the ContainerRecreateRequest that stops"} {
		if got := refusedKill(&Refusal{Kind: kind, Code: 500}, "log").Message; !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q", kind, got, want)
		}
	}
}

// A refused CRR create is a failed kill only while no CRR of its attempt is
// known: one the cache shows after all was made.
func TestARefusedCRRTheCacheShowsIsNoFailedKill(t *testing.T) {
	r := Refusal{Kind: ActionCreateCRR, Containers: []string{"log"}, Attempt: 2, Code: 500}
	for _, tc := range []struct {
		name   string
		crrs   []CRR
		failed bool
	}{
		{"no CRR", nil, true},
		{"only the earlier attempt's", []CRR{{Name: "a1", Attempt: 1}}, true},
		{"its attempt's", []CRR{{Name: "a1", Attempt: 1}, {Name: "a2", Attempt: 2}}, false},
	} {
		if got := refusedCRRFor(Input{Refusals: []Refusal{r}, CRRs: tc.crrs}, "log") != nil; got != tc.failed {
			t.Errorf("%s: failed kill %v, want %v", tc.name, got, tc.failed)
		}
	}
}

// sameImage: the node reports the reference it resolved, so a reported
// image matches the spec's when it is the same or ends in "/" + the spec's.
func TestSameImage(t *testing.T) {
	for _, tc := range []struct {
		reported, spec string
		want           bool
	}{
		{"busybox:1", "busybox:1", true},
		{"docker.io/library/busybox:1", "busybox:1", true},
		{"docker.io/library/xbusybox:1", "busybox:1", false},
		{"docker.io/library/busybox:2", "busybox:1", false},
		{"busybox:1", "docker.io/library/busybox:1", false},
		{"xbusybox:1", "busybox:1", false},
	} {
		if got := sameImage(tc.reported, tc.spec); got != tc.want {
			t.Errorf("sameImage(%q, %q) = %v, want %v", tc.reported, tc.spec, got, tc.want)
		}
	}
}

// bounded keeps a reported string whole up to the bound, inclusive.
func TestBoundedAtTheBound(t *testing.T) {
	exact := strings.Repeat("a", MaxRefusalMessage)
	if got := bounded(exact); got != exact {
		t.Errorf("a string of exactly the bound was cut: %d bytes", len(got))
	}
	if got := bounded(exact + "b"); got != exact+"..." {
		t.Errorf("one byte over: %q", got[len(got)-5:])
	}
}

// A CRR's deadline is the policy's, but never shorter than the pod's grace
// period plus the margin.
func TestCRRDeadlineCoversThePodsGrace(t *testing.T) {
	grace := func(s int64) *corev1.Pod {
		p := &corev1.Pod{}
		p.Spec.TerminationGracePeriodSeconds = &s
		return p
	}
	for _, tc := range []struct {
		pod    *corev1.Pod
		policy time.Duration
		want   time.Duration
	}{
		{grace(30), 10 * time.Second, time.Minute},
		{grace(100), time.Minute, 130 * time.Second},
		{grace(30), 5 * time.Minute, 5 * time.Minute},
		{&corev1.Pod{}, 0, time.Minute},
	} {
		if got := CRRDeadline(tc.pod, Policy{CRRDeadline: tc.policy}); got != tc.want {
			t.Errorf("CRRDeadline(grace %s, policy %s) = %s, want %s", PodGrace(tc.pod), tc.policy, got, tc.want)
		}
	}
}

// A plan's requeue is the earliest wait asked for, and a wait of zero or
// less is a second, never "no requeue" (which would leave the pod).
func TestRequeueKeepsTheEarliestAndNeverZero(t *testing.T) {
	var p Plan
	p.requeue(0)
	if p.RequeueAfter != time.Second {
		t.Errorf("requeue(0): %s, want 1s", p.RequeueAfter)
	}
	p = Plan{}
	p.requeue(time.Minute)
	p.requeue(-time.Second)
	p.requeue(time.Hour)
	if p.RequeueAfter != time.Second {
		t.Errorf("requeue(1m, -1s, 1h): %s, want 1s", p.RequeueAfter)
	}
}
