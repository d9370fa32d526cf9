package sim

import (
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/images/workload/spec"
	"github.com/sidecar-terminator/sidecar-terminator/sim/model"
)

// buildPod makes a pod from a template, drawing its durations.
func (s *Sim) buildPod(name string, uid types.UID, nodeName string, t *Template) *corev1.Pod {
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: uid},
		Spec:       corev1.PodSpec{RestartPolicy: t.RestartPolicy, NodeName: nodeName},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	if t.Grace > 0 {
		g := t.Grace
		pod.Spec.TerminationGracePeriodSeconds = &g
	}
	for k, v := range t.Annotations {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[k] = v
	}
	always := corev1.ContainerRestartPolicyAlways
	for _, c := range t.Init {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, s.buildContainer(pod, c))
	}
	for _, c := range t.Native {
		ctr := s.buildContainer(pod, c)
		ctr.RestartPolicy = &always
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, ctr)
	}
	for _, c := range t.Containers {
		pod.Spec.Containers = append(pod.Spec.Containers, s.buildContainer(pod, c))
	}
	s.ownByJob(pod, t)
	return pod
}

func (s *Sim) buildContainer(pod *corev1.Pod, c C) corev1.Container {
	ctr := corev1.Container{Name: c.Name, Image: c.Image, Env: c.Env, RestartPolicy: c.Policy, RestartPolicyRules: c.Rules}
	if ctr.Image == "" {
		ctr.Image = WorkloadImage
	}
	if c.NoArgs {
		return ctr
	}
	b := spec.Behaviour{Mode: spec.Sidecar}
	if len(c.ExitCodes) > 0 || !c.Seconds.zero() {
		b = spec.Behaviour{Mode: spec.Main, Duration: s.draw(c.Seconds)}
		if len(c.ExitCodes) > 0 {
			b.ExitCode = int(c.ExitCodes[0])
		}
		if len(c.ExitCodes) > 1 {
			codes := make([]string, len(c.ExitCodes))
			for i, x := range c.ExitCodes {
				codes[i] = strconv.Itoa(int(x))
			}
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[model.AnnotationExitCodesPrefix+c.Name] = strings.Join(codes, ",")
		}
	} else {
		switch on := c.OnSIGTERM; {
		case on == "ignore":
			b.IgnoreSIGTERM = true
		case strings.HasPrefix(on, "exit:"):
			b.SIGTERMExitCode, _ = strconv.Atoi(strings.TrimPrefix(on, "exit:"))
		}
	}
	ctr.Command = []string{"/workload"}
	ctr.Args = b.Args()
	return ctr
}

func (s *Sim) pickTemplate() *Template {
	total := 0
	for _, t := range s.sc.Templates {
		total += weight(t)
	}
	n := s.rng.IntN(total)
	for i := range s.sc.Templates {
		if n -= weight(s.sc.Templates[i]); n < 0 {
			return &s.sc.Templates[i]
		}
	}
	panic("unreachable")
}

func weight(t Template) int {
	if t.Weight == 0 {
		return 1
	}
	return t.Weight
}

func (s *Sim) sortedPodKeys() []cache.ObjectName {
	keys := make([]cache.ObjectName, 0, len(s.world.pods))
	for k := range s.world.pods {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
	return keys
}

// percentile of sorted durations, p in [0,1].
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p * float64(len(sorted)-1))
	return sorted[i]
}
