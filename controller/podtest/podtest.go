// Package podtest builds Job pods for tests and the simulator: a small fluent
// builder over corev1.Pod, so a table row reads like the situation it tests;
// and NopWriter, a reconciler.Writer that writes nothing.
package podtest

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Epoch is the time the builder's containers start at unless told otherwise.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Builder builds one pod.
type Builder struct{ pod *corev1.Pod }

// Pod starts a running pod with restartPolicy Never on node "node-1".
func Pod(name string) *Builder {
	return &Builder{pod: &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, NodeName: "node-1"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}}
}

func (b *Builder) Namespace(ns string) *Builder { b.pod.Namespace = ns; return b }

// GeneratedName names the pod as the API server does from generateName base
// (a Job's pods), with a fixed suffix of five characters.
func (b *Builder) GeneratedName(base, suffix string) *Builder {
	b.pod.GenerateName, b.pod.Name = base, base+suffix
	return b
}

// OwnedByJob makes the pod's controller the Job of that name, as the Job
// controller does.
func (b *Builder) OwnedByJob(job string) *Builder {
	yes := true
	b.pod.OwnerReferences = append(b.pod.OwnerReferences, metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job",
		Name: job, UID: types.UID("uid-job-" + job), Controller: &yes, BlockOwnerDeletion: &yes})
	return b
}

func (b *Builder) UID(uid string) *Builder   { b.pod.UID = types.UID(uid); return b }
func (b *Builder) Node(name string) *Builder { b.pod.Spec.NodeName = name; return b }
func (b *Builder) Phase(p corev1.PodPhase) *Builder {
	b.pod.Status.Phase = p
	return b
}
func (b *Builder) RestartPolicy(p corev1.RestartPolicy) *Builder {
	b.pod.Spec.RestartPolicy = p
	return b
}
func (b *Builder) OnFailure() *Builder { return b.RestartPolicy(corev1.RestartPolicyOnFailure) }

func (b *Builder) Annotate(key, value string) *Builder {
	if b.pod.Annotations == nil {
		b.pod.Annotations = map[string]string{}
	}
	b.pod.Annotations[key] = value
	return b
}

func (b *Builder) Deleting() *Builder {
	t := metav1.NewTime(Epoch)
	b.pod.DeletionTimestamp = &t
	return b
}

func (b *Builder) Condition(t corev1.PodConditionType, s corev1.ConditionStatus) *Builder {
	b.pod.Status.Conditions = append(b.pod.Status.Conditions, corev1.PodCondition{Type: t, Status: s})
	return b
}

// ConditionAt adds a condition that changed at the given time.
func (b *Builder) ConditionAt(t corev1.PodConditionType, s corev1.ConditionStatus, at time.Time) *Builder {
	b.pod.Status.Conditions = append(b.pod.Status.Conditions, corev1.PodCondition{Type: t, Status: s, LastTransitionTime: metav1.NewTime(at)})
	return b
}

// Container adds a regular container, running unless an option says otherwise.
func (b *Builder) Container(name string, opts ...Option) *Builder {
	c, s := newContainer(name, opts)
	b.pod.Spec.Containers = append(b.pod.Spec.Containers, c)
	if s != nil {
		b.pod.Status.ContainerStatuses = append(b.pod.Status.ContainerStatuses, *s)
	}
	return b
}

// Init adds a classic init container, completed unless an option says otherwise.
func (b *Builder) Init(name string, opts ...Option) *Builder {
	c, s := newContainer(name, append([]Option{Exited(0, Epoch)}, opts...))
	b.pod.Spec.InitContainers = append(b.pod.Spec.InitContainers, c)
	if s != nil {
		b.pod.Status.InitContainerStatuses = append(b.pod.Status.InitContainerStatuses, *s)
	}
	return b
}

// NativeSidecar adds an init container with restartPolicy Always, running.
func (b *Builder) NativeSidecar(name string, opts ...Option) *Builder {
	always := corev1.ContainerRestartPolicyAlways
	c, s := newContainer(name, opts)
	c.RestartPolicy = &always
	b.pod.Spec.InitContainers = append(b.pod.Spec.InitContainers, c)
	if s != nil {
		b.pod.Status.InitContainerStatuses = append(b.pod.Status.InitContainerStatuses, *s)
	}
	return b
}

// Build returns the pod; the builder must not be used after.
func (b *Builder) Build() *corev1.Pod { return b.pod }

// Option shapes one container and its status.
type Option func(c *corev1.Container, s **corev1.ContainerStatus)

func newContainer(name string, opts []Option) (corev1.Container, *corev1.ContainerStatus) {
	c := corev1.Container{Name: name, Image: "example.com/" + name + ":1"}
	s := &corev1.ContainerStatus{Name: name, Image: c.Image, ContainerID: "containerd://" + name + "-0",
		Started: boolPtr(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(Epoch)}}}
	for _, o := range opts {
		o(&c, &s)
	}
	return c, s
}

// Env adds a literal env var.
func Env(name, value string) Option {
	return func(c *corev1.Container, _ **corev1.ContainerStatus) {
		c.Env = append(c.Env, corev1.EnvVar{Name: name, Value: value})
	}
}

// EnvFrom adds an env var read from a field.
func EnvFrom(name, fieldPath string) Option {
	return func(c *corev1.Container, _ **corev1.ContainerStatus) {
		c.Env = append(c.Env, corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: fieldPath}}})
	}
}

func Image(image string) Option {
	return func(c *corev1.Container, s **corev1.ContainerStatus) {
		c.Image = image
		if *s != nil {
			(*s).Image = image
		}
	}
}

// Exited makes the container terminated with the exit code at the time.
func Exited(code int32, at time.Time) Option {
	return func(_ *corev1.Container, s **corev1.ContainerStatus) {
		(*s).Started = boolPtr(false)
		(*s).State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, StartedAt: metav1.NewTime(Epoch), FinishedAt: metav1.NewTime(at), ContainerID: (*s).ContainerID}}
	}
}

// Waiting makes the container wait with the reason, after an earlier run that
// ended with lastExit when lastExit is not nil.
func Waiting(reason string, lastExit *int32) Option {
	return func(_ *corev1.Container, s **corev1.ContainerStatus) {
		(*s).Started = boolPtr(false)
		(*s).State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
		if lastExit != nil {
			(*s).LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: *lastExit}}
		}
	}
}

// NeverStarted makes the container wait on an image it cannot pull, with no container ID.
func NeverStarted() Option {
	return func(c *corev1.Container, s **corev1.ContainerStatus) {
		Waiting("ImagePullBackOff", nil)(c, s)
		(*s).ContainerID = ""
	}
}

// Restarts sets the restart count.
func Restarts(n int32) Option {
	return func(_ *corev1.Container, s **corev1.ContainerStatus) { (*s).RestartCount = n }
}

// NoStatus leaves the container without a status, as before the kubelet reports one.
func NoStatus() Option {
	return func(_ *corev1.Container, s **corev1.ContainerStatus) { *s = nil }
}

// Running makes the container running (the default; for readability).
func Running() Option {
	return func(_ *corev1.Container, s **corev1.ContainerStatus) {
		(*s).State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(Epoch)}}
	}
}

// Int32 returns a pointer to v, for Waiting.
func Int32(v int32) *int32 { return &v }

func boolPtr(v bool) *bool { return &v }

// Policy sets the container's own restartPolicy (KEP-5307).
func Policy(p corev1.ContainerRestartPolicy) Option {
	return func(c *corev1.Container, _ **corev1.ContainerStatus) { c.RestartPolicy = &p }
}

// Rule appends a restartPolicyRule: action on exit codes op values.
func Rule(action corev1.ContainerRestartRuleAction, op corev1.ContainerRestartRuleOnExitCodesOperator, values ...int32) Option {
	return func(c *corev1.Container, _ **corev1.ContainerStatus) {
		c.RestartPolicyRules = append(c.RestartPolicyRules, corev1.ContainerRestartRule{Action: action,
			ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: op, Values: values}})
	}
}

// RestartOn is a rule Restart on exit codes In values.
func RestartOn(values ...int32) Option {
	return Rule(corev1.ContainerRestartRuleActionRestart, corev1.ContainerRestartRuleOnExitCodesOpIn, values...)
}
