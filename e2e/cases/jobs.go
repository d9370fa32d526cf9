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
	"github.com/sidecar-terminator/sidecar-terminator/sim/model"
)

// OpenKruise's env names, which the controller honours unchanged.
const (
	EnvWhenJobExit          = "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT"
	EnvWhenJobExitWithImage = "KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT_WITH_IMAGE"
	EnvIgnoreExitCode       = "KRUISE_TERMINATE_SIDECAR_IGNORE_EXIT_CODE"
)

// Container is one workload container of a Job's pod.
type Container struct {
	Name string
	spec.Behaviour
	Env map[string]string
	// Image replaces the workload image (pulled if not present); "" is
	// the workload image, which is never pulled.
	Image string
	// ExitCodeScript, on the mock virtual node only, gives the exit codes
	// of the container's successive runs, e.g. "1,1,0" (sim/model's
	// annotation); "" is the one code of its argv.
	ExitCodeScript string
	// Policy and Rules: the container's own restartPolicy and
	// restartPolicyRules (KEP-5307); "" leaves the pod's policy.
	Policy corev1.ContainerRestartPolicy
	Rules  []corev1.ContainerRestartRule
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
	if c.Image != "" {
		out.Image, out.ImagePullPolicy = c.Image, corev1.PullIfNotPresent
	}
	for _, k := range sortedKeys(c.Env) {
		out.Env = append(out.Env, corev1.EnvVar{Name: k, Value: c.Env[k]})
	}
	if c.Policy != "" {
		p := c.Policy
		out.RestartPolicy, out.RestartPolicyRules = &p, c.Rules
	}
	if c.CountFile != "" {
		out.VolumeMounts = []corev1.VolumeMount{{Name: runsVolume, MountPath: runsDir}}
	}
	return out
}

// A main whose successive runs exit with different codes counts its runs in
// a file on this emptyDir, which outlives the container's restarts.
const (
	runsVolume = "runs"
	runsDir    = "/runs"
)

// Runs makes a main's successive runs exit with codes, the last repeating,
// on a real node (the workload counts its runs) and on the mock node alike.
func (c Container) Runs(codes ...int) Container {
	c.ExitCodes, c.CountFile = codes, runsDir+"/"+c.Name
	return c
}

// WithPolicy gives the container its own restartPolicy and rules.
func (c Container) WithPolicy(p corev1.ContainerRestartPolicy, rules ...corev1.ContainerRestartRule) Container {
	c.Policy, c.Rules = p, rules
	return c
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
	// Labels go on the Job and its pod template.
	Labels map[string]string
	// Parallelism and completions; 0 is one pod.
	Parallelism int32
	// BackoffLimit; nil is 0.
	BackoffLimit *int32
	// Annotations go on the pod template (with any the containers add).
	Annotations map[string]string
}

// Build returns the batch/v1 Job, by default with backoffLimit 0 so that a
// failed pod fails the Job instead of starting another pod.
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
	if s.BackoffLimit != nil {
		backoff = *s.BackoffLimit
	}
	pod := corev1.PodSpec{RestartPolicy: rp, TerminationGracePeriodSeconds: &grace}
	annotations := map[string]string{}
	for k, v := range s.Annotations {
		annotations[k] = v
	}
	for _, c := range s.Containers {
		if c.CountFile != "" && len(pod.Volumes) == 0 {
			pod.Volumes = []corev1.Volume{{Name: runsVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
		}
		pod.Containers = append(pod.Containers, c.build())
		if c.ExitCodeScript != "" {
			annotations[model.AnnotationExitCodesPrefix+c.Name] = c.ExitCodeScript
		}
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
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, Labels: labels},
		Spec: batchv1.JobSpec{
			BackoffLimit: &backoff,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec:       pod,
			},
		},
	}
	if n := s.Parallelism; n > 0 {
		job.Spec.Parallelism, job.Spec.Completions = &n, &n
	}
	return job
}

// Name joins parts into a DNS-1123 name.
func Name(parts ...string) string {
	return strings.ToLower(strings.Join(parts, "-"))
}
