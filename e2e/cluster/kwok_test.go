package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// The stage file holds kwok's node stages and its pod-ready and pod-delete
// stages, never its pod-complete (which would end every Job pod at once),
// and the two pod stages with the quick-exit image and the delay filled in.
func TestKwokStagesLeaveJobPodsToTheSidecarStages(t *testing.T) {
	b, err := KwokStages(context.Background(), "example.org/quick-exit:1", 2500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, doc := range strings.Split(string(b), "\n---\n") {
		var s struct {
			Kind     string
			Metadata struct{ Name string }
			Spec     struct {
				Delay    struct{ DurationMilliseconds int64 }
				Selector struct {
					MatchExpressions []struct {
						Key    string
						Values []string
					}
				}
			}
		}
		if err := yaml.Unmarshal([]byte(doc), &s); err != nil {
			t.Fatalf("stage does not parse: %v\n%s", err, doc)
		}
		if s.Kind != "Stage" {
			t.Errorf("kind %q, want Stage", s.Kind)
		}
		names = append(names, s.Metadata.Name)
		switch s.Metadata.Name {
		case "main-exit":
			if s.Spec.Delay.DurationMilliseconds != 2500 {
				t.Errorf("main-exit delay %dms, want 2500", s.Spec.Delay.DurationMilliseconds)
			}
		case "sidecar-quick-exit":
			found := false
			for _, e := range s.Spec.Selector.MatchExpressions {
				found = found || (strings.Contains(e.Key, ".image") && len(e.Values) == 1 && e.Values[0] == "example.org/quick-exit:1")
			}
			if !found {
				t.Errorf("sidecar-quick-exit does not select the quick-exit image: %+v", s.Spec.Selector)
			}
		}
	}
	want := "node-initialize node-heartbeat-with-lease pod-ready pod-delete main-exit sidecar-quick-exit"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("stages %q, want %q", got, want)
	}
	if strings.Contains(string(b), "QUICK_EXIT_IMAGE") || strings.Contains(string(b), "MAIN_EXIT_MILLISECONDS") {
		t.Error("a placeholder is left unfilled")
	}
}
