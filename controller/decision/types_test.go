package decision

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

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
