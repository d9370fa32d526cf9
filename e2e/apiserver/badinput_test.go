package apiserver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// outcome is what a bad-input pod must end with.
type outcome struct {
	warning string // a Warning event with this reason
	crr     bool   // a CRR for the pod
	swapTo  string // the sidecar's image after a swap
}

func (o outcome) String() string {
	var parts []string
	if o.warning != "" {
		parts = append(parts, "Warning "+o.warning)
	}
	if o.crr {
		parts = append(parts, "CRR")
	}
	if o.swapTo != "" {
		parts = append(parts, "image swapped")
	}
	if !o.crr && o.swapTo == "" {
		parts = append(parts, "no action")
	}
	return strings.Join(parts, ", ")
}

// TestBadInputGetsAWarningNeverAWrongKill creates pods with every kind of bad
// input the issue lists, against the real binary, and checks each ends with
// its Warning event or its documented action, that main containers keep
// their images, and that the controller is still alive at the end.
func TestBadInputGetsAWarningNeverAWrongKill(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, true)
	e.createNode(t, ctx, "normal-1", nil)
	e.createNode(t, ctx, "virtual-1", map[string]string{"type": "virtual-kubelet"})

	long := strings.Repeat("x", 10*1024)
	digest := "ghcr.io/sidecar-terminator/quick-exit@sha256:" + strings.Repeat("ab", 32)
	env := func(name, value string) podtest.Option { return podtest.Env(name, value) }
	cases := map[string]struct {
		node    string
		build   func(*podtest.Builder) *podtest.Builder
		outcome outcome
	}{
		"env-empty": {node: "normal-1", build: func(b *podtest.Builder) *podtest.Builder {
			return b.Container("main", done()).Container("side", env(decision.EnvTerminate, ""))
		}, outcome: outcome{warning: decision.ReasonInvalidSidecarEnv}},
		"env-upper-true": {node: "normal-1", build: func(b *podtest.Builder) *podtest.Builder {
			return b.Container("main", done()).Container("side", env(decision.EnvTerminate, "TRUE"))
		}, outcome: outcome{crr: true}},
		"env-yes": {node: "normal-1", build: func(b *podtest.Builder) *podtest.Builder {
			return b.Container("main", done()).Container("side", env(decision.EnvTerminate, "yes"))
		}, outcome: outcome{warning: decision.ReasonInvalidSidecarEnv}},
		"env-10kb": {node: "normal-1", build: func(b *podtest.Builder) *podtest.Builder {
			return b.Container("main", done()).Container("side", env(decision.EnvTerminate, long))
		}, outcome: outcome{warning: decision.ReasonInvalidSidecarEnv}},
		"image-10kb": {node: "virtual-1", build: func(b *podtest.Builder) *podtest.Builder {
			return b.Container("main", done()).Container("side", env(decision.EnvTerminateWithImage, long))
		}, outcome: outcome{warning: decision.ReasonInvalidQuickExitImage}},
		"image-space": {node: "virtual-1", build: func(b *podtest.Builder) *podtest.Builder {
			return b.Container("main", done()).Container("side", env(decision.EnvTerminateWithImage, "quick exit:1"))
		}, outcome: outcome{warning: decision.ReasonInvalidQuickExitImage}},
		"image-uppercase": {node: "virtual-1", build: func(b *podtest.Builder) *podtest.Builder {
			return b.Container("main", done()).Container("side", env(decision.EnvTerminateWithImage, "Quick/Exit:1"))
		}, outcome: outcome{warning: decision.ReasonInvalidQuickExitImage}},
		"image-digest": {node: "virtual-1", build: func(b *podtest.Builder) *podtest.Builder {
			return b.Container("main", done()).Container("side", env(decision.EnvTerminateWithImage, digest))
		}, outcome: outcome{swapTo: digest}},
		"annotation-missing-container": {node: "normal-1", build: func(b *podtest.Builder) *podtest.Builder {
			return b.Annotate(decision.AnnotationSidecars, "istio-proxy,ghost").Container("main", done()).Container("istio-proxy")
		}, outcome: outcome{warning: decision.ReasonUnknownSidecarName, crr: true}},
		"annotation-names-main": {node: "normal-1", build: func(b *podtest.Builder) *podtest.Builder {
			return b.Annotate(decision.AnnotationSidecars, "main,side").Container("main", done()).Container("side")
		}, outcome: outcome{warning: decision.ReasonNoMainContainer}},
		"node-missing": {node: "no-such-node", build: func(b *podtest.Builder) *podtest.Builder {
			return b.Container("main", done()).Container("side", env(decision.EnvTerminate, "true"))
		}, outcome: outcome{warning: decision.ReasonNodeNotFound}},
		"fifty-sidecars": {node: "normal-1", build: func(b *podtest.Builder) *podtest.Builder {
			b = b.Container("main", done())
			for i := 0; i < 50; i++ {
				b = b.Container(fmt.Sprintf("side-%02d", i), env(decision.EnvTerminate, "true"))
			}
			return b
		}, outcome: outcome{crr: true}},
	}

	pods := map[string]*corev1.Pod{}
	for name, tc := range cases {
		p := tc.build(podtest.Pod(name).UID("").Node(tc.node)).Build()
		p.TypeMeta = metav1.TypeMeta{}
		pods[name] = e.createPod(t, ctx, p)
	}
	for name, tc := range cases {
		pod := pods[name]
		if tc.outcome.warning != "" {
			e.waitForEvent(t, ctx, pod, "Warning "+tc.outcome.warning)
		}
		if tc.outcome.crr {
			e.waitForEvent(t, ctx, pod, "Normal "+reconciler.ReasonTerminated)
			crr, err := e.kruise.AppsV1alpha1().ContainerRecreateRequests("default").Get(ctx, decision.CRRName(pod, 1), metav1.GetOptions{})
			if err != nil {
				t.Errorf("%s: CRR: %v", name, err)
			} else if name == "fifty-sidecars" && len(crr.Spec.Containers) != 50 {
				t.Errorf("%s: CRR names %d containers, want 50", name, len(crr.Spec.Containers))
			}
		}
		if tc.outcome.swapTo != "" {
			waitUntil(t, ctx, name+" swapped", func(ctx context.Context) (bool, error) {
				p, err := e.kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
				return err == nil && p.Spec.Containers[1].Image == tc.outcome.swapTo, err
			})
		}
	}
	// Nothing else happened: no CRR and no swap where none is due, and no
	// main container was touched anywhere.
	for name, tc := range cases {
		p, err := e.kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.Containers[0].Image != "example.com/main:1" {
			t.Errorf("%s: main container's image changed to %s", name, p.Spec.Containers[0].Image)
		}
		if tc.outcome.swapTo == "" && p.Spec.Containers[1].Image != "example.com/"+p.Spec.Containers[1].Name+":1" {
			t.Errorf("%s: sidecar image changed to %s", name, p.Spec.Containers[1].Image)
		}
		if _, err := e.kruise.AppsV1alpha1().ContainerRecreateRequests("default").Get(ctx, decision.CRRName(pods[name], 1), metav1.GetOptions{}); err == nil && !tc.outcome.crr {
			t.Errorf("%s: unexpected CRR", name)
		}
		t.Logf("%-29s %s; main container untouched", name+":", tc.outcome)
	}
	if !e.ctl.Process.Alive() {
		t.Fatalf("controller died:\n%s", e.ctl.LogTail(40))
	}
}

// TestCRRDeletedOrEditedBySomeoneElse: the controller's CRR disappears while
// the sidecar still runs; the controller makes the next attempt (never two of
// its CRRs at once), and a CRR edited by someone else does not make it act
// twice.
func TestCRRDeletedOrEditedBySomeoneElse(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, true)
	e.createNode(t, ctx, "normal-1", nil)
	pod := e.createPod(t, ctx, jobPod("victim", "normal-1", true, envCRR))
	name := decision.CRRName(pod, 1)
	crrs := e.kruise.AppsV1alpha1().ContainerRecreateRequests("default")
	waitUntil(t, ctx, "the first CRR", func(ctx context.Context) (bool, error) {
		_, err := crrs.Get(ctx, name, metav1.GetOptions{})
		return err == nil, nil
	})

	// Edited: someone relabels it. The controller's informer no longer lists
	// it (label selector), so to the controller it is gone: it makes it again
	// only once the expectation times out, and the create then meets the
	// existing name: AlreadyExists, no second object.
	crr, _ := crrs.Get(ctx, name, metav1.GetOptions{})
	crr.Labels["edited-by"] = "someone"
	if _, err := crrs.Update(ctx, crr, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Deleted: the controller sees the CRR go while the sidecar still runs.
	// Attempts never reset (a deleted CRR still counts as the attempt it
	// was), so it makes the next attempt, under the next deterministic name;
	// not at once: it remembers the CRR as last seen, and a stop kruise-daemon
	// may have begun under it is given its deadline and the pod's grace
	// period first (decision.stopUnderWay): about 100 s from the first CRR.
	if err := crrs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	next := decision.CRRName(pod, 2)
	waitUntilFor(t, ctx, 3*time.Minute, "the next attempt's CRR", func(ctx context.Context) (bool, error) {
		c, err := crrs.Get(ctx, next, metav1.GetOptions{})
		return err == nil && c.Labels["edited-by"] == "", nil
	})
	list, err := crrs.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Errorf("want exactly one CRR for the pod, got %d", len(list.Items))
	}
}

func done() podtest.Option { return podtest.Exited(0, time.Now().Truncate(time.Second)) }
