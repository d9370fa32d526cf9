package decision

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Classify gives every container of the pod its role and, for sidecars, its
// marks and the quick-exit image it may be swapped to. Problems found in the
// marks (bad env values, invalid or disallowed images, annotation names that
// match no regular container) come back as Problems; a container whose marks
// are unusable is never made a sidecar by them, which is the safe side.
func Classify(pod *corev1.Pod, policy Policy) ([]Container, []Problem) {
	var problems []Problem
	listed, annotationProblems := annotatedSidecars(pod)
	problems = append(problems, annotationProblems...)
	problems = append(problems, nearMisses(pod)...)

	statuses := statusByName(pod.Status.ContainerStatuses)
	out := make([]Container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	for i, c := range pod.Spec.InitContainers {
		role := RoleInit
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			role = RoleNativeSidecar
		}
		out = append(out, withStatus(Container{Name: c.Name, Index: i, Role: role, Image: c.Image},
			statusByName(pod.Status.InitContainerStatuses)[c.Name]))
	}
	for i, c := range pod.Spec.Containers {
		ctr, ps := classifyRegular(pod, i, c, listed[c.Name], policy)
		problems = append(problems, ps...)
		out = append(out, withRestartRules(pod, &pod.Spec.Containers[i], withStatus(ctr, statuses[c.Name])))
	}
	return out, problems
}

func classifyRegular(pod *corev1.Pod, index int, c corev1.Container, annotated bool, policy Policy) (Container, []Problem) {
	ctr := Container{Name: c.Name, Index: index, Role: RoleMain, Image: c.Image}
	var problems []Problem
	bad := func(reason, format string, args ...any) {
		problems = append(problems, Problem{Reason: reason, Message: BoundMessage(fmt.Sprintf("container %q: ", c.Name) + fmt.Sprintf(format, args...))})
	}
	var image string
	named := false // an image was named, usable or not: the default is not for it
	for _, env := range c.Env {
		switch env.Name {
		case EnvTerminate, EnvIgnoreExitCode:
			value, ok := literalBool(env)
			if !ok {
				bad(ReasonInvalidSidecarEnv, "env %s must be the literal value \"true\" or \"false\", got %s; the container is not treated as marked by it", env.Name, describeEnvValue(env))
				continue
			}
			if env.Name == EnvTerminate && value {
				ctr.KillByCRR = true
				ctr.MarkedBy = append(ctr.MarkedBy, EnvTerminate)
			}
			if env.Name == EnvIgnoreExitCode {
				ctr.IgnoreExitCode = value
			}
		case EnvECIContainerType:
			if env.ValueFrom == nil && strings.EqualFold(env.Value, eciSidecarType) {
				ctr.PlatformMark = EnvECIContainerType + "=" + eciSidecarType
			}
		case EnvTerminateWithImage:
			if env.ValueFrom != nil {
				bad(ReasonInvalidSidecarEnv, "env %s must have a literal value, not valueFrom", env.Name)
				continue
			}
			if env.Value == "" {
				continue
			}
			named = true
			if TooLong(env.Value) {
				// Still a sidecar (below), but with no usable image.
				ctr.MarkedBy = append(ctr.MarkedBy, EnvTerminateWithImage)
				bad(ReasonInvalidQuickExitImage, "%s", tooLongMessage("env "+env.Name, env.Value))
				continue
			}
			// The container is a sidecar even when its image proves unusable:
			// its owner said so, and treating it as a main container would only
			// keep the pod waiting for it forever.
			ctr.MarkedBy = append(ctr.MarkedBy, EnvTerminateWithImage)
			image = env.Value
		}
	}
	if annotated {
		ctr.KillByCRR = true
		ctr.MarkedBy = append(ctr.MarkedBy, AnnotationSidecars)
		v := pod.Annotations[AnnotationQuickExitImage]
		named = named || v != ""
		if image == "" && TooLong(v) {
			bad(ReasonInvalidQuickExitImage, "%s", tooLongMessage("annotation "+AnnotationQuickExitImage, v))
		} else if image == "" {
			image = v
		}
	}
	if len(ctr.MarkedBy) == 0 {
		// The ignore-exit-code mark means nothing on a main container.
		ctr.IgnoreExitCode = false
		return ctr, problems
	}
	ctr.Role = RoleSidecar
	if !named {
		ctr.DefaultImage = defaultImage(c, policy)
	}
	if image != "" {
		if err := ValidateImage(image); err != nil {
			bad(ReasonInvalidQuickExitImage, "quick-exit image %s is not a valid image reference: %v", Quote(image), err)
		} else if !ImageAllowed(image, policy.AllowedQuickExitImages) {
			bad(ReasonQuickExitImageNotAllowed, "quick-exit image %s is not in the allowlist %q", Quote(image), policy.AllowedQuickExitImages)
		} else if TooLong(c.Image) {
			// The swap's test op names the current image; the cache keeps
			// only its start.
			bad(ReasonInvalidQuickExitImage, "%s", tooLongMessage("the container's own image", c.Image))
		} else {
			ctr.QuickExitImage = image
		}
	}
	return ctr, problems
}

// defaultImage is the operator's default quick-exit image for a sidecar that
// names none, when it is usable: a valid reference on the allowlist (the
// controller refuses to start otherwise; checked here too, failing closed),
// and a container image the swap's test op can name.
func defaultImage(c corev1.Container, policy Policy) string {
	img := policy.DefaultQuickExitImage
	if img == "" || ValidateImage(img) != nil || !ImageAllowed(img, policy.AllowedQuickExitImages) || TooLong(c.Image) {
		return ""
	}
	return img
}

// literalBool reads a true/false env value, in any case. Anything else,
// including an empty value or a valueFrom, is not a usable mark.
func literalBool(env corev1.EnvVar) (value, ok bool) {
	if env.ValueFrom != nil {
		return false, false
	}
	switch strings.ToLower(env.Value) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

func describeEnvValue(env corev1.EnvVar) string {
	if env.ValueFrom != nil {
		return "a valueFrom"
	}
	return Quote(env.Value)
}

// annotatedSidecars reads the sidecar-terminator.io/sidecars annotation. Names
// that are not regular containers (unknown, or init containers) are reported.
func annotatedSidecars(pod *corev1.Pod) (map[string]bool, []Problem) {
	raw, ok := pod.Annotations[AnnotationSidecars]
	if !ok {
		return nil, nil
	}
	if TooLong(raw) {
		return nil, []Problem{{Reason: ReasonUnknownSidecarName, Message: tooLongMessage("annotation "+AnnotationSidecars, raw)}}
	}
	regular := map[string]bool{}
	for _, c := range pod.Spec.Containers {
		regular[c.Name] = true
	}
	listed := map[string]bool{}
	var unknown []string
	for _, n := range strings.Split(raw, ",") {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		if regular[n] {
			listed[n] = true
		} else {
			unknown = append(unknown, n)
		}
	}
	if len(unknown) == 0 {
		return listed, nil
	}
	sort.Strings(unknown)
	return listed, []Problem{{Reason: ReasonUnknownSidecarName, Message: BoundMessage(fmt.Sprintf(
		"annotation %s names %q, which are not regular containers of the pod; they are ignored", AnnotationSidecars, unknown))}}
}

// ValidateImage checks that image is a valid image reference. Its error
// never repeats the image, which the caller quotes (bounded) itself.
func ValidateImage(image string) error {
	if TooLong(image) {
		return fmt.Errorf("over %d bytes", MaxValueLen)
	}
	if strings.TrimSpace(image) != image {
		return fmt.Errorf("leading or trailing white space")
	}
	if err := parsedImage(image).err; err != nil {
		return errors.New(strings.ReplaceAll(err.Error(), image, "the reference"))
	}
	return nil
}

// ImageAllowed fails closed: an image is swapped in only when the operator's
// allowlist names it, its repository, or "*" (any valid image, an explicit
// choice). An empty allowlist allows nothing. The swapped container keeps its
// securityContext, mounts and token, so whoever may name the image (a pod
// author, through env or annotation) must not be able to pick any image.
func ImageAllowed(image string, allowlist []string) bool {
	ref := parsedImage(image)
	if ref.err != nil {
		return false
	}
	for _, allowed := range allowlist {
		if allowed == image || allowed == AllowAnyImage {
			return true
		}
		tail := allowed[strings.LastIndex(allowed, "/")+1:]
		if strings.ContainsAny(tail, ":@") {
			// A full reference allows exactly that image, however it is spelled.
			if want := parsedImage(allowed); want.err == nil && want.name == ref.name {
				return true
			}
			continue
		}
		// A bare repository allows any tag or digest of it.
		if repo := parsedRepository(allowed); repo.err == nil && repo.name == ref.repository {
			return true
		}
	}
	return false
}

func statusByName(statuses []corev1.ContainerStatus) map[string]*corev1.ContainerStatus {
	m := make(map[string]*corev1.ContainerStatus, len(statuses))
	for i := range statuses {
		m[statuses[i].Name] = &statuses[i]
	}
	return m
}

func withStatus(c Container, s *corev1.ContainerStatus) Container {
	if s == nil {
		c.State = StateUnknown
		return c
	}
	c.RestartCount = s.RestartCount
	c.ContainerID = s.ContainerID
	c.StatusImage = s.Image
	c.WasTerminated = s.LastTerminationState.Terminated != nil
	switch {
	case s.State.Terminated != nil:
		c.State = StateTerminated
		c.ExitCode = s.State.Terminated.ExitCode
		c.FinishedAt = s.State.Terminated.FinishedAt.Time
	case s.State.Running != nil:
		c.State = StateRunning
	case s.State.Waiting != nil:
		c.State = StateWaiting
		c.WaitingReason = s.State.Waiting.Reason
	default:
		c.State = StateUnknown
	}
	return c
}
