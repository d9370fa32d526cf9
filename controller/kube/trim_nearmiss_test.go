package kube

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

// The informer's trim keeps the names the near-miss Warning needs (and not
// their values), so the controller warns about the pods it caches exactly as
// about the full pods.
func TestTrimPodKeepsNearMissNames(t *testing.T) {
	full := podtest.Pod("p").Node("n").
		Annotate("sidecar-terminator.io/sidecar", "proxy").Annotate("unrelated.example/key", "x").
		Container("main", podtest.Exited(0, podtest.Epoch), podtest.Env("HTTP_PROXY", "http://proxy")).
		Container("proxy", podtest.Env("KRUISE_TERMINATE_SIDECARS_WHEN_JOB_EXIT", "a long value"), podtest.Running()).Build()
	obj, err := TrimPod(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	trimmed := obj.(*corev1.Pod)
	if got := trimmed.Spec.Containers[1].Env; len(got) != 1 || got[0].Name != "KRUISE_TERMINATE_SIDECARS_WHEN_JOB_EXIT" || got[0].Value != "" {
		t.Errorf("proxy env after trim: %+v", got)
	}
	if got := trimmed.Spec.Containers[0].Env; len(got) != 0 {
		t.Errorf("main env after trim: %+v, want none", got)
	}
	if _, ok := trimmed.Annotations["unrelated.example/key"]; ok {
		t.Error("an unrelated annotation survived the trim")
	}
	in := func(p *corev1.Pod) decision.Input {
		return decision.Input{Pod: p, Node: decision.Node{Name: "n", Found: true}, CRRAPI: true,
			Now: podtest.Epoch.Add(time.Second), Policy: decision.DefaultPolicy()}
	}
	a, b := decision.Decide(in(full)), decision.Decide(in(trimmed))
	if !reflect.DeepEqual(a.Problems, b.Problems) || len(a.Problems) != 2 {
		t.Errorf("problems differ after trim or are not the two near misses:\nfull    %v\ntrimmed %v", a.Problems, b.Problems)
	}
}
