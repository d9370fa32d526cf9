package decision

import (
	"strings"
	"testing"
	"time"
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
