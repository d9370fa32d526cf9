package native

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

const (
	// LabelOptIn opts a namespace, or a single pod, in: value LabelOptInValue.
	// The webhook's configuration selects on it, so pods without it are never
	// sent to the webhook at all.
	LabelOptIn      = "sidecar-terminator.io/native-sidecars"
	LabelOptInValue = "enabled"
	// AnnotationConverted says, on a converted pod, which sidecars moved and
	// why: "moved a,b to initContainers as native sidecars: <why>".
	AnnotationConverted = "sidecar-terminator.io/converted"
)

// Config is what the conversion needs besides the pod and the nodes.
type Config struct {
	// VirtualNodes selects virtual-kubelet nodes, which never count as
	// running native sidecars (node.go).
	VirtualNodes labels.Selector
	// AllowAnnotated moves sidecars marked only by the pod annotation
	// (containers an injector added); off, they stay on the kill path.
	AllowAnnotated bool
	// ServerVersion is the API server's version (gitVersion).
	ServerVersion string
}

// Container is the plan for one marked regular container.
type Container struct {
	Name   string
	Move   bool
	Reason string
}

// Plan is the conversion of one pod.
type Plan struct {
	// Convert is true when at least one container moves.
	Convert bool
	// Reason says why the pod is converted, or why it is not.
	Reason string
	// Containers holds one entry per marked regular container, in spec order.
	Containers []Container
	// InitOrder is the moved containers in the order they are appended to
	// initContainers: the kubelet stops native sidecars in reverse start
	// order, so the stop-order's first name comes last.
	InitOrder []string
	// Problems are bad marks found on the pod; a pod with any is not converted.
	Problems []decision.Problem
}

// blocking are the problems of the marks that leave the pod unconverted: the
// controller cannot tell what the pod's owner meant. Quick-exit image
// problems do not block: a native sidecar needs no image.
var blocking = map[string]bool{
	decision.ReasonInvalidSidecarEnv:  true,
	decision.ReasonUnknownSidecarName: true,
	decision.ReasonNearMissMark:       true,
	decision.ReasonInvalidStopOrder:   true,
}

// Decide plans the conversion of pod, which may be scheduled to one of nodes
// (every node the cluster has, as the caller knows them).
func Decide(pod *corev1.Pod, nodes []*corev1.Node, cfg Config) Plan {
	switch pod.Spec.RestartPolicy {
	case corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure:
	default:
		return Plan{Reason: fmt.Sprintf("restartPolicy is %q: not a Job-like pod", pod.Spec.RestartPolicy)}
	}
	classified, problems := decision.Classify(pod, decision.Policy{AllowedQuickExitImages: []string{decision.AllowAnyImage}})
	var p Plan
	for _, pr := range problems {
		if blocking[pr.Reason] {
			p.Problems = append(p.Problems, pr)
		}
	}
	order, orderProblem := decision.StopOrder(pod, classified)
	if orderProblem != nil {
		p.Problems = append(p.Problems, *orderProblem)
	}
	var mains int
	for _, c := range classified {
		switch {
		case c.Role == decision.RoleMain:
			mains++
		case c.Role == decision.RoleSidecar:
			p.Containers = append(p.Containers, Container{Name: c.Name})
		}
	}
	switch {
	case len(p.Problems) > 0:
		return p.not("the pod's marks have problems (see the Warning events); nothing is converted while its owner's intent is in doubt")
	case len(p.Containers) == 0:
		return p.not("no regular container is marked as a sidecar")
	case mains == 0:
		return p.not("the pod has no main container")
	}
	if ok, why := ServerRunsNativeSidecars(cfg.ServerVersion); !ok {
		return p.not(why)
	}
	where, ok := nodesRunNativeSidecars(pod, nodes, cfg.VirtualNodes)
	if !ok {
		return p.not(where)
	}
	p.checkContainers(pod, classified, cfg)
	if why := p.orderBlocks(order); why != "" {
		return p.not(why)
	}
	p.InitOrder = initOrder(order, p.Containers)
	if len(p.InitOrder) == 0 {
		return p.not("no marked sidecar can move")
	}
	p.Convert = true
	p.Reason = where
	return p
}

// not returns the plan with nothing moving, and why.
func (p Plan) not(why string) Plan {
	for i := range p.Containers {
		p.Containers[i].Move = false
		if p.Containers[i].Reason == "" {
			p.Containers[i].Reason = "the pod is not converted"
		}
	}
	p.Convert, p.Reason, p.InitOrder = false, why, nil
	return p
}

// checkContainers decides, for each marked container, whether it may move.
func (p *Plan) checkContainers(pod *corev1.Pod, classified []decision.Container, cfg Config) {
	byName := map[string]decision.Container{}
	for _, c := range classified {
		byName[c.Name] = c
	}
	for i := range p.Containers {
		c := &p.Containers[i]
		spec := regular(pod, c.Name)
		marks := byName[c.Name].MarkedBy
		switch {
		case !cfg.AllowAnnotated && len(marks) == 1 && marks[0] == decision.AnnotationSidecars:
			c.Reason = "marked only by the annotation " + decision.AnnotationSidecars + " (an injector's container); the operator has not allowed moving those"
		case spec.Lifecycle != nil && spec.Lifecycle.PostStart != nil:
			c.Reason = "has a postStart hook: as a native sidecar it would run before any main container starts, which the main containers may not expect"
		case spec.RestartPolicy != nil || len(spec.RestartPolicyRules) > 0:
			c.Reason = "has a restart policy of its own, which a native sidecar replaces with Always"
		default:
			c.Move = true
			c.Reason = "moved to initContainers with restartPolicy Always"
		}
	}
}

// orderBlocks says why a stop order cannot be kept, if it cannot: the kubelet
// stops native sidecars only after every regular container, so a sidecar of
// the order that stays regular would be stopped first, whatever the order.
func (p Plan) orderBlocks(order []string) string {
	var staying []string
	for _, n := range order {
		for _, c := range p.Containers {
			if c.Name == n && !c.Move {
				staying = append(staying, n)
			}
		}
	}
	if len(staying) == 0 {
		return ""
	}
	return fmt.Sprintf("annotation %s names %s, which cannot move; the order is kept only if every sidecar it names moves", decision.AnnotationStopOrder, strings.Join(staying, ","))
}

// initOrder is the order the moved sidecars start in. The kubelet kills the
// pod once no regular container is left to keep or start, and drops the
// native sidecars from the containers to restart so they cannot keep it
// alive (k8s.io/kubernetes v1.37.2, pkg/kubelet/kuberuntime/
// kuberuntime_manager.go, computePodActions: "keepCount == 0 &&
// len(changes.ContainersToStart) == 0"); the kill stops each native sidecar
// only after every main container and every later native sidecar has
// terminated (kuberuntime_termination_order.go, newTerminationOrdering):
// reverse start order. The stop order stops unnamed sidecars before the
// named ones, so the unnamed start last and the named start in reverse.
func initOrder(order []string, cs []Container) []string {
	moving := map[string]bool{}
	for _, c := range cs {
		moving[c.Name] = c.Move
	}
	var out []string
	for i := len(order) - 1; i >= 0; i-- {
		if moving[order[i]] {
			out = append(out, order[i])
		}
	}
	for _, c := range cs {
		if c.Move && !slices.Contains(order, c.Name) {
			out = append(out, c.Name)
		}
	}
	return out
}

func regular(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	return &corev1.Container{}
}

// nodesRunNativeSidecars says whether every node the pod can be scheduled to
// runs native sidecars: the pod's node when it names one, else every node
// its node selector, required node affinity and tolerations allow, as the
// scheduler reads them (k8s.io/component-helpers). Cordoned nodes count:
// they may be uncordoned. No candidate at all is not sure either: the node
// the pod waits for is not known.
func nodesRunNativeSidecars(pod *corev1.Pod, nodes []*corev1.Node, virtual labels.Selector) (string, bool) {
	var candidates []*corev1.Node
	if pod.Spec.NodeName != "" {
		for _, n := range nodes {
			if n.Name == pod.Spec.NodeName {
				candidates = append(candidates, n)
			}
		}
	} else {
		affinity := nodeaffinity.GetRequiredNodeAffinity(pod)
		for _, n := range nodes {
			match, err := affinity.Match(n)
			if err != nil {
				return fmt.Sprintf("the pod's node affinity cannot be read: %v", err), false
			}
			if match && tolerated(pod, n) {
				candidates = append(candidates, n)
			}
		}
	}
	if len(candidates) == 0 {
		return "no known node can run the pod, so the node it will run on is not known", false
	}
	names := make([]string, 0, len(candidates))
	for _, n := range candidates {
		if ok, why := NodeRunsNativeSidecars(n, virtual); !ok {
			return why, false
		}
		names = append(names, n.Name)
	}
	sort.Strings(names)
	const shown = 5
	list := strings.Join(names, ", ")
	if len(names) > shown {
		list = fmt.Sprintf("%s and %d more", strings.Join(names[:shown], ", "), len(names)-shown)
	}
	return fmt.Sprintf("every node the pod can be scheduled to runs native sidecars (kubelet %s or newer): %s", MinVersion, list), true
}

// tolerated reports whether the pod tolerates every NoSchedule and NoExecute
// taint of the node. Comparison operators in tolerations are honoured: a
// node counted that the scheduler would refuse only makes the check stricter.
func tolerated(pod *corev1.Pod, n *corev1.Node) bool {
	_, untolerated := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), n.Spec.Taints, pod.Spec.Tolerations,
		func(t *corev1.Taint) bool {
			return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
		}, true)
	return !untolerated
}
