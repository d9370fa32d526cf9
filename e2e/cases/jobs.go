// Package cases holds what the e2e environments share: Job builders over
// the workload image, readers of the cluster's state (pods, CRRs, events),
// and the features themselves as functions returning
// *features.FeatureBuilder, so the real-node suite and a kind suite run the
// very same assertions.
package cases

import (
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/images"
	"github.com/sidecar-terminator/sidecar-terminator/images/workload/spec"
)

// OpenKruise's env names, which the controller honours unchanged.
const (
	EnvWhenJobExit    = "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT"
	EnvIgnoreExitCode = "KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE"
)

// Container is one workload container of a Job's pod.
type Container struct {
	Name string
	spec.Behaviour
	Env map[string]string
}

// Main runs for seconds and exits with code.
func Main(name string, seconds float64, code int) Container {
	return Container{Name: name, Behaviour: spec.Behaviour{Mode: spec.Main, Duration: secondsDuration(seconds), ExitCode: code}}
}

// Sidecar runs until SIGTERM. onSIGTERM is "exit:C" or "ignore"; marked
// adds KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT=true.
func Sidecar(name, onSIGTERM string, marked bool) Container {
	b, err := spec.Parse([]string{spec.Sidecar, "--on-sigterm", onSIGTERM})
	if err != nil {
		panic("cases.Sidecar: " + err.Error()) // a typo in a test, not a runtime condition
	}
	c := Container{Name: name, Behaviour: b, Env: map[string]string{}}
	if marked {
		c.Env[EnvWhenJobExit] = "true"
	}
	return c
}

// With returns c with env name=value added.
func (c Container) With(name, value string) Container {
	env := map[string]string{}
	for k, v := range c.Env {
		env[k] = v
	}
	env[name] = value
	c.Env = env
	return c
}

func (c Container) build() corev1.Container {
	out := corev1.Container{
		Name: c.Name, Image: images.Workload.Ref, ImagePullPolicy: corev1.PullNever,
		Args: c.Args(),
	}
	for _, k := range sortedKeys(c.Env) {
		out.Env = append(out.Env, corev1.EnvVar{Name: k, Value: c.Env[k]})
	}
	return out
}

// JobSpec describes a Job whose pod runs workload containers.
type JobSpec struct {
	Name, Namespace string
	RestartPolicy   corev1.RestartPolicy
	Containers      []Container
	// NativeSidecars are init containers with restartPolicy Always.
	NativeSidecars []Container
	// GracePeriodSeconds of the pod. Default 5: with the kubelet's 30 s, a
	// sidecar that ignores SIGTERM would hold its pod that long after a CRR.
	GracePeriodSeconds int64
	Labels             map[string]string
}

// Build returns the batch/v1 Job, with backoffLimit 0 so that a failed pod
// fails the Job instead of starting another pod.
func (s JobSpec) Build() *batchv1.Job {
	grace := s.GracePeriodSeconds
	if grace == 0 {
		grace = 5
	}
	rp := s.RestartPolicy
	if rp == "" {
		rp = corev1.RestartPolicyNever
	}
	backoff := int32(0)
	pod := corev1.PodSpec{RestartPolicy: rp, TerminationGracePeriodSeconds: &grace}
	for _, c := range s.Containers {
		pod.Containers = append(pod.Containers, c.build())
	}
	always := corev1.ContainerRestartPolicyAlways
	for _, c := range s.NativeSidecars {
		ic := c.build()
		ic.RestartPolicy = &always
		pod.InitContainers = append(pod.InitContainers, ic)
	}
	labels := map[string]string{"app.kubernetes.io/part-of": "sidecar-terminator-e2e"}
	for k, v := range s.Labels {
		labels[k] = v
	}
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			BackoffLimit: &backoff,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       pod,
			},
		},
	}
}

// Name joins parts into a DNS-1123 name.
func Name(parts ...string) string {
	return strings.ToLower(strings.Join(parts, "-"))
}
