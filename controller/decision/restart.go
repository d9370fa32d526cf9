package decision

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// The kubelet's restart rules for a regular container that has exited, at
// the Kubernetes version this project pins (v1.35.4). One function answers
// "will the kubelet run this container again?" for the decision, the
// simulator's kubelet model (sim/model) and the mock virtual node's provider,
// so the three cannot disagree. The differential test in hack/kubeletrules
// compares it with the kubelet's own functions over every combination.
//
// Derived from k8s.io/kubernetes@v1.35.4:
//   - pkg/api/v1/pod/util.go, ContainerShouldRestart and
//     FindMatchingContainerRestartRule (KEP-5307): the container's
//     restartPolicyRules are read only when the container sets its own
//     restartPolicy; the first rule whose exit codes match decides; action
//     Restart restarts the container, action RestartAllContainers (KEP-5532)
//     restarts it too, with every other container of the pod; no match falls
//     back to the container's restartPolicy, and a container without one
//     follows the pod's (Never: never; OnFailure: on a non-zero exit;
//     Always or unset: always).
//   - pkg/kubelet/container/helpers.go, ShouldContainerBeRestarted: a dead
//     container is restarted exactly when ContainerShouldRestart says so
//     (feature gate ContainerRestartRules, beta and on by default in 1.35).
//   - pkg/kubelet/kubelet_pods.go, getPhase: a terminated regular container
//     counts as restartable by the same function, or when its terminated
//     reason is RestartingAllContainers; the pod is terminal only when no
//     container is restartable.
//
// RestartAllContainers is alpha in 1.35 (gate
// RestartAllContainersOnContainerExits, off by default): with the gate off
// the kubelet falls back to the container's policy. The API server rejects
// the action unless its own gate is on, so a pod that carries the action was
// admitted by a cluster that runs it; counting the exit as a restart is also
// the safe side, since a sidecar is then never stopped early.

// RestartingAllContainersReason is the terminated reason the kubelet gives a
// container it stopped to restart the whole pod in place
// (pkg/kubelet/kubelet_pods.go, RestartingAllContainers).
const RestartingAllContainersReason = "RestartingAllContainers"

// Restart is the kubelet's answer for one exited regular container.
type Restart struct {
	// Again: the kubelet runs the container again.
	Again bool
	// AllContainers: it does so by restarting every container of the pod in
	// place (a RestartAllContainers rule matched).
	AllContainers bool
	// Rule says which rule decided, for a person: "rule 1 (Restart on exit
	// codes In [42])", "container restartPolicy OnFailure", "pod restartPolicy Never".
	Rule string
	// Exit is the exit code the answer is for, where the caller asked about
	// one exit of several (restartsAfterKill).
	Exit int32
}

// ContainerRestart applies the kubelet's restart rules to a regular container
// of a pod with restartPolicy podPolicy that exited with exitCode.
func ContainerRestart(podPolicy corev1.RestartPolicy, c *corev1.Container, exitCode int32) Restart {
	if c.RestartPolicy != nil {
		if i, rule, ok := matchingRule(c.RestartPolicyRules, exitCode); ok {
			why := fmt.Sprintf("rule %d (%s on exit codes %s %v)", i+1, rule.Action, rule.ExitCodes.Operator, rule.ExitCodes.Values)
			switch rule.Action {
			case corev1.ContainerRestartRuleActionRestart:
				return Restart{Again: true, Rule: why}
			case corev1.ContainerRestartRuleActionRestartAllContainers:
				return Restart{Again: true, AllContainers: true, Rule: why}
			}
			// An action this version does not know: the kubelet falls back
			// to the container's policy, as below.
		}
		why := "container restartPolicy " + string(*c.RestartPolicy)
		switch *c.RestartPolicy {
		case corev1.ContainerRestartPolicyAlways:
			return Restart{Again: true, Rule: why}
		case corev1.ContainerRestartPolicyOnFailure:
			return Restart{Again: exitCode != 0, Rule: why}
		case corev1.ContainerRestartPolicyNever:
			return Restart{Rule: why}
		}
	}
	why := "pod restartPolicy " + string(podPolicy)
	switch podPolicy {
	case corev1.RestartPolicyOnFailure:
		return Restart{Again: exitCode != 0, Rule: why}
	case corev1.RestartPolicyNever:
		return Restart{Rule: why}
	}
	// Always, or unset (which the API defaults to Always).
	return Restart{Again: true, Rule: why}
}

// RestartsAfter reports whether the kubelet runs the container again after it
// exits with exitCode: ContainerRestart(...).Again.
func RestartsAfter(podPolicy corev1.RestartPolicy, c *corev1.Container, exitCode int32) bool {
	return ContainerRestart(podPolicy, c, exitCode).Again
}

// matchingRule returns the first rule whose exit codes match, with its index.
// A rule without exit codes matches nothing.
func matchingRule(rules []corev1.ContainerRestartRule, exitCode int32) (int, corev1.ContainerRestartRule, bool) {
	for i, rule := range rules {
		if rule.ExitCodes == nil {
			continue
		}
		listed := false
		for _, v := range rule.ExitCodes.Values {
			if v == exitCode {
				listed = true
			}
		}
		switch rule.ExitCodes.Operator {
		case corev1.ContainerRestartRuleOnExitCodesOpIn:
			if listed {
				return i, rule, true
			}
		case corev1.ContainerRestartRuleOnExitCodesOpNotIn:
			if !listed {
				return i, rule, true
			}
		}
	}
	return 0, corev1.ContainerRestartRule{}, false
}

// RestartingAllContainers reports whether the kubelet is restarting, or is
// about to restart, every container of the pod in place (KEP-5532), read from
// the API status as pkg/kubelet/container/helpers.go ShouldAllContainersRestart
// reads it: the condition AllContainersRestarting is True, or a container
// (init or regular) shows an exit that matches one of its RestartAllContainers
// rules, or one was stopped for that restart. Such a pod is not done, whatever
// its containers show.
func RestartingAllContainers(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.AllContainersRestarting && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	check := func(specs []corev1.Container, statuses []corev1.ContainerStatus) bool {
		byName := statusByName(statuses)
		for i := range specs {
			s := byName[specs[i].Name]
			if s == nil || s.State.Terminated == nil {
				continue
			}
			if s.State.Terminated.Reason == RestartingAllContainersReason {
				return true
			}
			if _, rule, ok := matchingRule(specs[i].RestartPolicyRules, s.State.Terminated.ExitCode); ok &&
				rule.Action == corev1.ContainerRestartRuleActionRestartAllContainers {
				return true
			}
		}
		return false
	}
	return check(pod.Spec.InitContainers, pod.Status.InitContainerStatuses) || check(pod.Spec.Containers, pod.Status.ContainerStatuses)
}

// Exit codes a stop produces. A ContainerRecreateRequest's kill is the CRI's
// StopContainer (kruise v1.9.1 pkg/daemon/containerrecreate, through the
// kubelet's kuberuntime killContainer): the stop signal, SIGKILL after the
// grace period. The process exits with a code of its own on SIGTERM (0 for a
// well-behaved one), or the runtime reports 128+signal: 143 (SIGTERM), 137
// (SIGKILL). The image swap's quick-exit image (images/quick-exit) exits 0.
const (
	ExitGraceful = 0
	ExitSIGTERM  = 143
	ExitSIGKILL  = 137
)

// StopExits are the exit codes a stop of ours can produce, in the order a
// stop produces them: a graceful exit, SIGTERM, SIGKILL after the grace
// period. An image swap stops the running container the same way (the
// kubelet kills it to start the new image: kuberuntime_manager.go
// computePodActions, "Container spec hash changed") before the quick-exit
// image exits 0.
var StopExits = []int32{ExitGraceful, ExitSIGTERM, ExitSIGKILL}

// restartsAfterKill reports whether a sidecar cannot be stopped by a kill,
// and the kubelet's answer that says so:
//   - the kubelet runs it again after exit code 0, the exit of a graceful
//     stop and of the quick-exit image (its own policy Always, or a Restart
//     rule on 0);
//   - or a RestartAllContainers rule (KEP-5532) matches any exit a stop can
//     produce (0, 143, 137): the kubelet would then restart every container
//     of the pod in place, the finished mains included, under any pod
//     restartPolicy. The gate is beta and on by default from Kubernetes 1.36
//     (pkg/features/kube_features.go, RestartAllContainersOnContainerExits, at
//     k8s.io/kubernetes v1.36.3 and v1.37.2); an API server that admitted the
//     rule runs it.
//
// A sidecar that restarts itself only on the signal codes (its own policy
// OnFailure, or a Restart rule on 143) may still be stopped: a kill it
// survives is a failed kill, followed through like any other. Exit 0 is
// asked first, so a sidecar blocked for both reasons is described by the
// graceful exit.
//
// The pod-wide restart is asked as the kubelet asks it
// (pkg/kubelet/container/helpers.go ShouldAllContainersRestart, through
// FindMatchingContainerRestartRule): the first rule matching the exit decides,
// whether or not the container sets a restartPolicy of its own.
func restartsAfterKill(podPolicy corev1.RestartPolicy, c *corev1.Container) (Restart, bool) {
	for _, code := range StopExits {
		if r := ContainerRestart(podPolicy, c, code); code == ExitGraceful && r.Again {
			r.Exit = code
			return r, true
		}
		if i, rule, ok := matchingRule(c.RestartPolicyRules, code); ok && rule.Action == corev1.ContainerRestartRuleActionRestartAllContainers {
			return Restart{Again: true, AllContainers: true, Exit: code,
				Rule: fmt.Sprintf("rule %d (%s on exit codes %s %v)", i+1, rule.Action, rule.ExitCodes.Operator, rule.ExitCodes.Values)}, true
		}
	}
	r := ContainerRestart(podPolicy, c, ExitGraceful)
	r.Exit = ExitGraceful
	return r, false
}

// withRestartRules fills in what the kubelet's restart rules say of a
// classified regular container.
func withRestartRules(pod *corev1.Pod, spec *corev1.Container, c Container) Container {
	c.RestartRules = describeRestartRules(pod.Spec.RestartPolicy, spec)
	if c.State == StateTerminated {
		c.AfterExit = ContainerRestart(pod.Spec.RestartPolicy, spec, c.ExitCode)
	}
	if c.Role == RoleSidecar {
		c.AfterKill, c.KillBlocked = restartsAfterKill(pod.Spec.RestartPolicy, spec)
	}
	return c
}

// describeRestartRules says which rules govern the container: its own rules
// and policy when it sets a policy (rules are read only then), else the pod's.
func describeRestartRules(podPolicy corev1.RestartPolicy, c *corev1.Container) string {
	if c.RestartPolicy == nil {
		return "pod restartPolicy " + string(podPolicy)
	}
	s := "container restartPolicy " + string(*c.RestartPolicy)
	for i, r := range c.RestartPolicyRules {
		if r.ExitCodes == nil {
			continue
		}
		s += fmt.Sprintf("; rule %d: %s on exit codes %s %v", i+1, r.Action, r.ExitCodes.Operator, r.ExitCodes.Values)
	}
	return s
}

// ReasonSidecarRestartsAfterKill: a sidecar's own restart rules run it again
// after the exit a stop produces, so no kill can stop it.
const ReasonSidecarRestartsAfterKill = "SidecarRestartsAfterKill"

// ReasonSidecarKillRestartsPod: a sidecar's RestartAllContainers rule matches
// an exit a stop produces, so a stop would make the kubelet run the finished
// main containers again. It is never stopped.
const ReasonSidecarKillRestartsPod = "SidecarKillRestartsPod"

// killBlockedMessage says why a sidecar is not stopped and what to change.
func killBlockedMessage(s Container) string {
	if s.AfterKill.AllContainers {
		return fmt.Sprintf("container %q is not stopped: its %s matches exit %d, which a stop produces "+
			"(0 graceful, 143 SIGTERM, 137 SIGKILL after the grace period); the kubelet would restart every container "+
			"of the pod in place and run the finished main containers again. Exclude 0, 137 and 143 from the rule's "+
			"exit codes, or make it a native sidecar (an init container with restartPolicy Always), which the kubelet "+
			"stops itself once the main containers are done", s.Name, s.AfterKill.Rule, s.AfterKill.Exit)
	}
	return fmt.Sprintf("container %q cannot be stopped by a kill: its %s makes the kubelet run it again after it exits; "+
		"make it a native sidecar (an init container with restartPolicy Always), which the kubelet stops itself once "+
		"the main containers are done", s.Name, s.AfterKill.Rule)
}

// killBlockedReason is the Warning's reason for a sidecar no kill may stop.
func killBlockedReason(s Container) string {
	if s.AfterKill.AllContainers {
		return ReasonSidecarKillRestartsPod
	}
	return ReasonSidecarRestartsAfterKill
}
