package cases

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
)

// Expect is what a Job case must end with.
type Expect struct {
	Job batchv1.JobConditionType
	// Phase of the pod; "" when the Job controller may delete the pod
	// before it settles.
	Phase corev1.PodPhase
	// ExitCodes of regular containers once terminated.
	ExitCodes map[string]int32
	// InitExitCodes of init containers (native sidecars) once terminated.
	InitExitCodes map[string]int32
	// CRRContainers the one CRR must name; nil means no CRR may ever exist.
	CRRContainers []string
	// Event: a SidecarTerminating event on the pod.
	Event bool
	// PodCondition that must be True on the pod (e.g. SidecarTerminated).
	PodCondition corev1.PodConditionType
}

// Clients are the API clients a feature uses, built from the environment.
type Clients struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
}

// ClientsFrom builds Clients from the e2e-framework config.
func ClientsFrom(cfg *envconf.Config) (Clients, error) {
	rc := cfg.Client().RESTConfig()
	kc, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return Clients{}, fmt.Errorf("kube client: %w", err)
	}
	dc, err := dynamic.NewForConfig(rc)
	if err != nil {
		return Clients{}, fmt.Errorf("dynamic client: %w", err)
	}
	return Clients{Kube: kc, Dynamic: dc}, nil
}

// JobFeature runs one Job to its end and asserts want: the Job's condition,
// the pod's phase, each container's exit code, the CRRs and the events.
func JobFeature(name string, js JobSpec, want Expect) *features.FeatureBuilder {
	return features.New(name).
		WithLabel("type", "job").
		Setup(createNamespaceAndJob(&js)).
		Assess("job ends as expected", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			RunAndCheck(ctx, t, mustClients(t, cfg), js.Namespace, js.Name, 3*time.Minute, want)
			return ctx
		}).
		Teardown(deleteNamespace(&js))
}

// eventWait bounds the wait for an expected event after the Job ended:
// events follow the actions they report, and the controller defers them
// while it is busy (up to 30 s, controller/app/events.go).
const eventWait = time.Minute

// RunAndCheck runs the Job to its end (RunToEnd) and asserts want. An
// expected event is waited for, up to eventWait, since the Job may finish
// before the controller has written it.
func RunAndCheck(ctx context.Context, t *testing.T, cl Clients, ns, job string, timeout time.Duration, want Expect) *Observation {
	t.Helper()
	obs, err := RunToEnd(ctx, cl, ns, job, timeout)
	if err != nil {
		t.Fatal(err)
	}
	if want.Event && obs.Pod != nil && len(obs.Events) == 0 {
		// Check reports the miss; the wait only gives the event its time.
		_ = WaitForPodEvent(ctx, cl.Kube, obs.Pod, corev1.EventTypeNormal, ReasonSidecarTerminating, eventWait)
		if obs.Events, err = PodEvents(ctx, cl.Kube, ns, obs.Pod.Name, ReasonSidecarTerminating); err != nil {
			t.Fatal(err)
		}
	}
	obs.Check(t, want)
	return obs
}

// Observation is what was seen while a Job ran.
type Observation struct {
	Job *batchv1.Job
	// Pod is the last state seen of the Job's (first) pod.
	Pod *corev1.Pod
	// CRRs are every CRR name ever seen for the pod, with the containers
	// each named.
	CRRs map[string][]string
	// CRRCreated holds each CRR's creation time.
	CRRCreated map[string]time.Time
	// PodGone: the pod was seen, then deleted.
	PodGone bool
	// Events are the SidecarTerminating events on the pod.
	Events []corev1.Event
}

// RunToEnd polls until the Job has finished, recording the pod and every
// CRR seen on the way (the pod, and with it its CRRs, may be deleted by
// the Job controller before the end).
func RunToEnd(ctx context.Context, cl Clients, ns, job string, timeout time.Duration) (*Observation, error) {
	obs := &Observation{CRRs: map[string][]string{}}
	deadline := time.Now().Add(timeout)
	for {
		j, err := cl.Kube.BatchV1().Jobs(ns).Get(ctx, job, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("get job %s/%s: %w", ns, job, err)
		}
		obs.Job = j
		if err := obs.observePod(ctx, cl, ns, job); err != nil {
			return nil, err
		}
		// A pod seen before and gone now was deleted (by the Job controller,
		// once the Job failed): its last state seen is all there is.
		if JobFinished(j) != "" && (obs.Pod == nil || obs.PodGone || podDone(obs.Pod)) {
			break
		}
		if time.Now().After(deadline) {
			return obs, fmt.Errorf("job %s/%s not finished after %s: %s", ns, job, timeout, obs)
		}
		if err := sleep(ctx, 250*time.Millisecond); err != nil {
			return obs, err
		}
	}
	if obs.Pod != nil {
		evs, err := PodEvents(ctx, cl.Kube, ns, obs.Pod.Name, ReasonSidecarTerminating)
		if err != nil {
			return nil, err
		}
		obs.Events = evs
	}
	return obs, nil
}

func (o *Observation) observePod(ctx context.Context, cl Clients, ns, job string) error {
	pods, err := JobPods(ctx, cl.Kube, ns, job)
	if err != nil {
		return err
	}
	if len(pods) == 0 {
		o.PodGone = o.Pod != nil
		return nil
	}
	sort.Slice(pods, func(i, j int) bool { return pods[i].CreationTimestamp.Before(&pods[j].CreationTimestamp) })
	o.Pod = &pods[0]
	crrs, err := CRRsForPod(ctx, cl.Dynamic, ns, o.Pod.Name)
	if err != nil {
		return err
	}
	for _, c := range crrs {
		o.CRRs[c.GetName()] = CRRContainers(c)
		if o.CRRCreated == nil {
			o.CRRCreated = map[string]time.Time{}
		}
		o.CRRCreated[c.GetName()] = c.GetCreationTimestamp().Time
	}
	return nil
}

// podDone: terminal phase and every regular container terminated. The
// phase alone is not enough: the controller may patch it (ignore exit code)
// while a sidecar still runs, and the kubelet reports again once it exits.
func podDone(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
		return false
	}
	for _, c := range p.Spec.Containers {
		if _, ok := ExitCode(p, c.Name); !ok {
			return false
		}
	}
	return true
}

func (o *Observation) String() string {
	s := fmt.Sprintf("job conditions %v", o.Job.Status.Conditions)
	if o.Pod != nil {
		s += fmt.Sprintf("; pod %s phase %s", o.Pod.Name, o.Pod.Status.Phase)
		if d := o.Pod.DeletionTimestamp; d != nil {
			s += fmt.Sprintf(" (deleted at %s)", d.UTC().Format(time.TimeOnly))
		}
		for _, c := range o.Pod.Status.ContainerStatuses {
			s += fmt.Sprintf("; %s %+v", c.Name, c.State)
		}
	}
	return s + fmt.Sprintf("; CRRs %v", o.CRRs)
}

// Check asserts want against what was observed.
func (o *Observation) Check(t *testing.T, want Expect) {
	t.Helper()
	checkJobAndExits(t, o, want)
	switch {
	case want.CRRContainers == nil && len(o.CRRs) > 0:
		t.Errorf("CRRs %v created, want none", o.CRRs)
	case want.CRRContainers != nil && len(o.CRRs) != 1:
		t.Errorf("%d CRRs %v, want exactly one", len(o.CRRs), o.CRRs)
	case want.CRRContainers != nil:
		for _, got := range o.CRRs {
			if !slices.Equal(sorted(got), sorted(want.CRRContainers)) {
				t.Errorf("CRR names containers %v, want %v", got, want.CRRContainers)
			}
		}
	}
	if want.Event && len(o.Events) == 0 {
		t.Errorf("no %s event on pod %s", ReasonSidecarTerminating, o.Pod.Name)
	}
	if !want.Event && len(o.Events) > 0 {
		t.Errorf("unexpected %s event: %s", ReasonSidecarTerminating, o.Events[0].Message)
	}
	if want.PodCondition != "" && !hasCondition(o.Pod, want.PodCondition) {
		t.Errorf("pod has no %s=True condition: %v", want.PodCondition, o.Pod.Status.Conditions)
	}
}

// checkJobAndExits asserts the Job's condition, the pod's phase and the
// containers' exit codes.
func checkJobAndExits(t *testing.T, o *Observation, want Expect) {
	t.Helper()
	if got := JobFinished(o.Job); got != want.Job {
		t.Errorf("job condition = %q, want %q (%s)", got, want.Job, o)
	}
	if o.Pod == nil {
		t.Fatalf("no pod seen for job %s", o.Job.Name)
	}
	if want.Phase != "" && o.Pod.Status.Phase != want.Phase {
		t.Errorf("pod phase = %s, want %s (%s)", o.Pod.Status.Phase, want.Phase, o)
	}
	for name, code := range want.ExitCodes {
		if got, ok := ExitCode(o.Pod, name); !ok || got != code {
			t.Errorf("container %s: exit code %d (terminated %v), want %d (%s)", name, got, ok, code, o)
		}
	}
	for name, code := range want.InitExitCodes {
		var got *corev1.ContainerStateTerminated
		for _, s := range o.Pod.Status.InitContainerStatuses {
			if s.Name == name {
				got = s.State.Terminated
			}
		}
		if got == nil || got.ExitCode != code {
			t.Errorf("init container %s: terminated %+v, want exit code %d", name, got, code)
		}
	}
}

func hasCondition(p *corev1.Pod, c corev1.PodConditionType) bool {
	for _, pc := range p.Status.Conditions {
		if pc.Type == c && pc.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func createNamespaceAndJob(js *JobSpec) features.Func {
	return func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
		ctx = createNamespace(js)(ctx, t, cfg)
		cl := mustClients(t, cfg)
		if _, err := cl.Kube.BatchV1().Jobs(js.Namespace).Create(ctx, js.Build(), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create job %s: %v", js.Name, err)
		}
		return ctx
	}
}

// createNamespace creates js's namespace, e2e-<name> unless it has one.
func createNamespace(js *JobSpec) features.Func {
	return func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
		cl := mustClients(t, cfg)
		if js.Namespace == "" {
			js.Namespace = Name("e2e", js.Name)
		}
		if err := CreateNamespace(ctx, cl.Kube, js.Namespace); err != nil {
			t.Fatal(err)
		}
		return ctx
	}
}

// CreateNamespace creates ns and waits for its default ServiceAccount,
// which pod admission requires.
func CreateNamespace(ctx context.Context, cs kubernetes.Interface, ns string) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	for range 100 {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
			return nil
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("no default serviceaccount in %s after 10 s", ns)
}

func deleteNamespace(js *JobSpec) features.Func {
	return func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
		cl := mustClients(t, cfg)
		bg := metav1.DeletePropagationBackground
		// Not waited for: the cluster is torn down at the end anyway, and
		// a namespace deletion would only add time.
		if err := cl.Kube.CoreV1().Namespaces().Delete(ctx, js.Namespace, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", js.Namespace, err)
		}
		return ctx
	}
}

func mustClients(t *testing.T, cfg *envconf.Config) Clients {
	t.Helper()
	cl, err := ClientsFrom(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
