package cases

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/images/workload/spec"
)

// shipPort is where the proxy sidecar acknowledges the shipper's lines.
const shipPort = 9000

// shipperAndProxy: a proxy that acknowledges lines on the pod's loopback,
// listed first (as injected meshes are), and a log shipper that, on
// SIGTERM, delivers its last line through it and exits 0, or 3 if it was
// lost. Both marked for termination.
func shipperAndProxy() (proxy, shipper Container) {
	proxy = Sidecar("proxy", "exit:0", true)
	proxy.ListenPort = shipPort
	shipper = Sidecar("shipper", "exit:0", true)
	shipper.DeliverPort = shipPort
	return proxy, shipper
}

// StopOrderFeature: a log shipper that must flush through the proxy before
// the proxy goes. The pod asks for the shipper first (the stop-order
// annotation): the controller stops it with a CRR of stage 1, deletes that
// CRR once the shipper has exited (kruise-daemon takes one CRR of a pod at a
// time), and only then stops the proxy with a CRR of stage 2. This is the
// delete-then-create path, with kruise-daemon doing the kills. The
// shipper's exit code 0 says its last line was delivered.
func StopOrderFeature() *features.FeatureBuilder {
	proxy, shipper := shipperAndProxy()
	js := JobSpec{Name: "stop-order", RestartPolicy: never,
		Containers:  []Container{Main("main", 2, 0), proxy, shipper},
		Annotations: map[string]string{decision.AnnotationStopOrder: "shipper,proxy"}}
	want := Expect{Job: batchv1.JobComplete, Phase: corev1.PodSucceeded, ExitCodes: map[string]int32{"main": 0, "proxy": 0, "shipper": 0}}
	return features.New("stop order: the shipper, then the proxy").WithLabel("type", "job").
		Setup(createNamespaceAndJob(&js)).
		Assess("the proxy's CRR comes after the shipper exited and its CRR was deleted", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			cl := mustClients(t, cfg)
			obs, err := RunToEnd(ctx, cl, js.Namespace, js.Name, 3*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			checkJobAndExits(t, obs, want)
			shipper, ok := ContainerState(obs.Pod, "shipper")
			if !ok || shipper.State.Terminated == nil {
				t.Fatalf("shipper not terminated: %+v", shipper)
			}
			// The controller's own account, in order: each action is an
			// event (waited for: events follow the actions).
			var msgs []string
			for deadline := time.Now().Add(eventWait); ; {
				evs, err := PodEvents(ctx, cl.Kube, js.Namespace, obs.Pod.Name, ReasonSidecarTerminating)
				if err != nil {
					t.Fatal(err)
				}
				msgs = eventMessagesInOrder(evs)
				if len(msgs) >= 3 || time.Now().After(deadline) {
					break
				}
				if err := sleep(ctx, 500*time.Millisecond); err != nil {
					t.Fatal(err)
				}
			}
			steps := []string{"Stopping sidecars [shipper]: created ContainerRecreateRequest", "Deleted ContainerRecreateRequest", "Stopping sidecars [proxy]: created ContainerRecreateRequest"}
			if len(msgs) != len(steps) {
				t.Fatalf("events %q, want %d in order: %q", msgs, len(steps), steps)
			}
			for i, step := range steps {
				if !strings.HasPrefix(msgs[i], step) {
					t.Errorf("event %d is %q, want it to begin %q", i+1, msgs[i], step)
				}
			}
			// Both times have one-second resolution.
			finished := shipper.State.Terminated.FinishedAt.Time
			for name, containers := range obs.CRRs {
				if len(containers) == 1 && containers[0] == "proxy" && obs.CRRCreated[name].Before(finished) {
					t.Errorf("the proxy's CRR %s was created at %s, before the shipper exited at %s", name, obs.CRRCreated[name], finished)
				}
			}
			return ctx
		}).
		Teardown(deleteNamespace(&js))
}

// NoStopOrderFeature: the same pod without the order. One CRR names both
// sidecars in the pod's order, and kruise-daemon stops them one after the
// other in that order (kruise v1.9.1, pkg/daemon/containerrecreate/
// crr_daemon_controller.go: one KillContainer per sync, each waiting for
// the container to stop): the proxy goes first and the shipper's last line
// is lost (exit 3), so the pod and the Job fail.
func NoStopOrderFeature() *features.FeatureBuilder {
	proxy, shipper := shipperAndProxy()
	return JobFeature("No stop order: the proxy stops first and the shipper's last line is lost",
		JobSpec{Name: "no-stop-order", RestartPolicy: never, Containers: []Container{Main("main", 2, 0), proxy, shipper}},
		Expect{Job: batchv1.JobFailed, Phase: corev1.PodFailed, ExitCodes: map[string]int32{"main": 0, "proxy": 0, "shipper": int32(spec.ExitLost)},
			CRRContainers: []string{"proxy", "shipper"}, Event: true})
}

// eventMessagesInOrder orders a pod's events by name: client-go's recorder
// names each <object>.<recording time in ns, hex>, finer than the events'
// one-second timestamps (k8s.io/client-go v0.35.4, tools/record/event.go
// makeEvent, tools/record/util/util.go GenerateEventName).
func eventMessagesInOrder(evs []corev1.Event) []string {
	sort.Slice(evs, func(i, j int) bool { return evs[i].Name < evs[j].Name })
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Message
	}
	return out
}
