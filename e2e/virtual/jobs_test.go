package virtual

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/images/workload/spec"
	"github.com/sidecar-terminator/sidecar-terminator/sim/model"
)

// Sidecar marks, as users write them.
var (
	envImage  = corev1.EnvVar{Name: decision.EnvTerminateWithImage, Value: quickExitImage}
	envPlain  = corev1.EnvVar{Name: decision.EnvTerminate, Value: "true"}
	envIgnore = corev1.EnvVar{Name: decision.EnvIgnoreExitCode, Value: "true"}
)

// jobSpec is one Job: a main and a sidecar, both the workload image unless
// sidecarImage says otherwise.
type jobSpec struct {
	name         string
	policy       corev1.RestartPolicy
	main         spec.Behaviour
	mainCodes    string // model exit-code script of the main's runs, e.g. "1,1,0"
	sidecar      spec.Behaviour
	sidecarImage string
	sidecarEnv   []corev1.EnvVar
	parallelism  int32
	// pod lets a case adjust the template (affinity, node selector).
	pod func(*corev1.PodSpec)
}

func mainFor(seconds float64, code int) spec.Behaviour {
	return spec.Behaviour{Mode: spec.Main, Duration: time.Duration(seconds * float64(time.Second)), ExitCode: code}
}

func sidecarExit(code int) spec.Behaviour {
	return spec.Behaviour{Mode: spec.Sidecar, SIGTERMExitCode: code}
}

// job renders js pinned to the virtual nodes.
func (js jobSpec) job(ns string) *batchv1.Job {
	image := js.sidecarImage
	if image == "" {
		image = workloadImage
	}
	n := js.parallelism
	if n == 0 {
		n = 1
	}
	podSpec := corev1.PodSpec{
		RestartPolicy:                 js.policy,
		TerminationGracePeriodSeconds: ptr.To[int64](3),
		NodeSelector:                  map[string]string{"type": "virtual-kubelet"},
		Tolerations: []corev1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: corev1.TolerationOpEqual,
			Value: "mock", Effect: corev1.TaintEffectNoSchedule}},
		Containers: []corev1.Container{
			{Name: "main", Image: workloadImage, ImagePullPolicy: corev1.PullNever, Args: js.main.Args()},
			{Name: "sidecar", Image: image, ImagePullPolicy: corev1.PullIfNotPresent, Args: js.sidecar.Args(), Env: js.sidecarEnv},
		},
	}
	if js.pod != nil {
		js.pod(&podSpec)
	}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"case": js.name}}, Spec: podSpec}
	if js.mainCodes != "" {
		tmpl.Annotations = map[string]string{model.AnnotationExitCodesPrefix + "main": js.mainCodes}
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: js.name, Namespace: ns},
		Spec: batchv1.JobSpec{Parallelism: &n, Completions: &n, BackoffLimit: ptr.To[int32](6),
			TTLSecondsAfterFinished: nil, Template: tmpl},
	}
}

// observation is every version of the Job's pods seen by a watch opened
// before the Job was created, and the Job at the end.
type observation struct {
	mu       sync.Mutex
	versions []*corev1.Pod
	job      *batchv1.Job
}

func (o *observation) add(p *corev1.Pod) {
	o.mu.Lock()
	o.versions = append(o.versions, p)
	o.mu.Unlock()
}

// pods returns the newest version seen of each pod, by name. The watch and
// the final list may deliver out of order: resourceVersions decide.
func (o *observation) pods() map[string]*corev1.Pod {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := map[string]*corev1.Pod{}
	for _, p := range o.versions {
		if old, ok := out[p.Name]; !ok || rv(p) >= rv(old) {
			out[p.Name] = p
		}
	}
	return out
}

func rv(p *corev1.Pod) uint64 {
	n, _ := strconv.ParseUint(p.ResourceVersion, 10, 64)
	return n
}

// watchPods records every version of the namespace's pods until ctx ends.
func watchPods(ctx context.Context, t *testing.T, ns string) *observation {
	t.Helper()
	w, err := suite.kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch pods in %s: %v", ns, err)
	}
	o := &observation{}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok {
				o.add(p)
			}
		}
	}()
	return o
}

// runJob creates the Job and waits until it is Complete or Failed (or the
// timeout); obs holds every pod version seen on the way.
func runJob(ctx context.Context, t *testing.T, ns string, js jobSpec, timeout time.Duration) *observation {
	t.Helper()
	wctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	obs := watchPods(wctx, t, ns)
	if _, err := suite.kube.BatchV1().Jobs(ns).Create(ctx, js.job(ns), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create job %s: %v", js.name, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		j, err := suite.kube.BatchV1().Jobs(ns).Get(ctx, js.name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		obs.job = j
		return jobFinished(j) != "", nil
	})
	// The watch may lag: the pods as listed now are their last versions.
	if list, lerr := suite.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); lerr == nil {
		for i := range list.Items {
			obs.add(&list.Items[i])
		}
	}
	cancel()
	if err != nil {
		t.Fatalf("job %s did not finish: %v\n%s", js.name, err, describePods(obs))
	}
	return obs
}

func jobFinished(j *batchv1.Job) batchv1.JobConditionType {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.Type
		}
	}
	return ""
}

// describePods is the last state of each pod, for failure messages.
func describePods(o *observation) string {
	out := ""
	for name, p := range o.pods() {
		out += fmt.Sprintf("%s on %s: %s", name, p.Spec.NodeName, p.Status.Phase)
		for i, c := range p.Status.ContainerStatuses {
			out += fmt.Sprintf(" %s[%s restarts=%d %s]", c.Name, p.Spec.Containers[i].Image, c.RestartCount, stateString(c.State))
		}
		out += "\n"
	}
	return out
}

func stateString(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Terminated != nil:
		return fmt.Sprintf("terminated(%d)", s.Terminated.ExitCode)
	case s.Waiting != nil:
		return "waiting(" + s.Waiting.Reason + ")"
	}
	return "none"
}

func containerStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func containerImage(p *corev1.Pod, name string) string {
	for _, c := range p.Spec.Containers {
		if c.Name == name {
			return c.Image
		}
	}
	return ""
}
