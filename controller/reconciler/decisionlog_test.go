package reconciler_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// lines collects what a sync logs at the default verbosity (0).
type lines struct {
	mu  sync.Mutex
	all []string
}

func (l *lines) sync(t *testing.T, f *fixture) []string {
	t.Helper()
	logger := funcr.New(func(prefix, args string) {
		l.mu.Lock()
		l.all = append(l.all, args)
		l.mu.Unlock()
	}, funcr.Options{Verbosity: 0})
	ctx := klog.NewContext(context.Background(), logger)
	if _, err := f.rec.Sync(ctx, cache.ObjectName{Namespace: f.w.pod.Namespace, Name: f.w.pod.Name}); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.all
	l.all = nil
	return out
}

// A decision that writes is one log line at the default verbosity: the
// write's, naming the decision's verdict and reason.
func TestADecisionThatWritesIsOneLogLineNamingIt(t *testing.T) {
	f := newFixture(jobPod(markCRR))
	var l lines
	got := l.sync(t, f)
	if len(f.w.sent) != 1 {
		t.Fatalf("writes %v, want one CRR", f.w.sent)
	}
	if len(got) != 1 {
		t.Fatalf("%d lines at verbosity 0, want 1:\n%s", len(got), strings.Join(got, "\n"))
	}
	for _, want := range []string{`"msg"="Action"`, `"verdict"="` + string(decision.VerdictAct) + `"`, `"reason"=`, `"result"="success"`} {
		if !strings.Contains(got[0], want) {
			t.Errorf("line lacks %s: %s", want, got[0])
		}
	}
}

// A decision with no write is still one line when it says something the
// operator must see.
func TestADecisionWithNoPathIsOneLogLine(t *testing.T) {
	f := newFixture(jobPod(markCRR))
	f.w.crrAPI = false // no CRR path and no image to swap in
	var l lines
	got := l.sync(t, f)
	if len(f.w.sent) != 0 {
		t.Fatalf("writes %v, want none", f.w.sent)
	}
	decisions := 0
	for _, line := range got {
		if strings.Contains(line, `"msg"="Decision"`) {
			decisions++
			if !strings.Contains(line, `"verdict"="`+string(decision.VerdictNoPath)+`"`) {
				t.Errorf("decision line does not say %s: %s", decision.VerdictNoPath, line)
			}
		}
	}
	if decisions != 1 {
		t.Errorf("%d Decision lines, want 1:\n%s", decisions, strings.Join(got, "\n"))
	}
}
