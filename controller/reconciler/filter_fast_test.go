package reconciler_test

import (
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/controller/reconciler"
)

// wholeViewMatters is the pod filter as it was before its quick look at the
// fields most updates change: the whole decision view compared by
// reflection. The oracle the quick look is held to.
func wholeViewMatters(old, new *corev1.Pod) bool {
	if old.UID == new.UID && !decision.Considered(old) && !decision.Considered(new) {
		return false
	}
	view := func(p *corev1.Pod) corev1.Pod {
		v := *p
		v.ResourceVersion, v.ManagedFields, v.Status.Conditions = "", nil, nil
		for _, c := range p.Status.Conditions {
			if c.Type == decision.ConditionSidecarTerminated || c.Type == corev1.AllContainersRestarting {
				v.Status.Conditions = append(v.Status.Conditions, c)
			}
		}
		return v
	}
	a, b := view(old), view(new)
	return !equality.Semantic.DeepEqual(&a, &b)
}

// The quick look changes no answer: over random pod pairs (one or two
// random changes, some the decision reads, some not), PodUpdateMatters says
// what the whole-view comparison says.
func TestPodUpdateMattersAsTheWholeView(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 0))
	kept, dropped := 0, 0
	for i := 0; i < 50000; i++ {
		old := randomPod(rng)
		new := old.DeepCopy()
		for n := 1 + rng.IntN(2); n > 0; n-- {
			mutate(rng, new)
		}
		want := wholeViewMatters(old, new)
		if got := reconciler.PodUpdateMatters(old, new); got != want {
			t.Fatalf("pair %d: PodUpdateMatters = %v, the whole view says %v\nold: %+v\nnew: %+v", i, got, want, old, new)
		}
		if want {
			kept++
		} else {
			dropped++
		}
	}
	if kept < 5000 || dropped < 5000 {
		t.Fatalf("%d kept, %d dropped: the pairs do not exercise both answers", kept, dropped)
	}
}

// burstPods is a pod of the bench's burst as the informer holds it (two
// containers, the sidecar marked) and its next version: the main exited.
func burstPods() (*corev1.Pod, *corev1.Pod) {
	old := podtest.Pod("p").Container("main", podtest.Running()).
		Container("sidecar", podtest.Env(decision.EnvTerminate, "true"), podtest.Running()).
		Condition(corev1.PodReady, corev1.ConditionTrue).Build()
	old.ResourceVersion = "1"
	new := old.DeepCopy()
	new.ResourceVersion = "2"
	new.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 0, FinishedAt: metav1.NewTime(podtest.Epoch.Add(time.Minute))}}
	return old, new
}

// The filter's cost on an update that matters (a main exits: most of a
// burst's updates) and on one it drops (a readiness flip).
func BenchmarkPodUpdateMatters(b *testing.B) {
	old, exited := burstPods()
	flipped := old.DeepCopy()
	flipped.ResourceVersion = "3"
	flipped.Status.Conditions[0].Status = corev1.ConditionFalse
	b.Run("main-exits", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !reconciler.PodUpdateMatters(old, exited) {
				b.Fatal("dropped")
			}
		}
	})
	b.Run("readiness-flip", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if reconciler.PodUpdateMatters(old, flipped) {
				b.Fatal("kept")
			}
		}
	})
}

// The pod filter compares pods in their protobuf encoding, which holds only
// the fields tagged for it: every field of a pod, at any depth, is. The
// types that encode themselves (times, quantities) are leaves, and the
// pod's TypeMeta, constant in the cache, is left out of the encoding.
func TestEveryPodFieldIsInItsProtobufEncoding(t *testing.T) {
	leaves := map[reflect.Type]bool{
		reflect.TypeFor[metav1.Time](): true, reflect.TypeFor[metav1.MicroTime](): true, reflect.TypeFor[resource.Quantity](): true,
	}
	seen := map[reflect.Type]bool{}
	fields := 0
	var walk func(typ reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Array || typ.Kind() == reflect.Map {
			if typ.Kind() == reflect.Map {
				walk(typ.Key(), path+"[key]")
			}
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || leaves[typ] || seen[typ] {
			return
		}
		seen[typ] = true
		for i := range typ.NumField() {
			f := typ.Field(i)
			if !f.IsExported() || (typ == reflect.TypeFor[corev1.Pod]() && f.Name == "TypeMeta") {
				continue
			}
			tag := f.Tag.Get("protobuf")
			if tag == "" || tag == "-" {
				t.Errorf("%s.%s (%s) has no protobuf tag: the pod filter would not see it change", path, f.Name, typ)
				continue
			}
			if strings.Contains(tag, "embedded=") || f.Anonymous {
				walk(f.Type, path)
			} else {
				walk(f.Type, path+"."+f.Name)
			}
			fields++
		}
	}
	walk(reflect.TypeFor[corev1.Pod](), "Pod")
	if fields < 100 {
		t.Fatalf("only %d fields walked", fields)
	}
}
