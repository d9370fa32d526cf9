package decision

import (
	"fmt"
	"strings"
	"time"
)

// Platform is what runs a node's pods, known from what the node says of
// itself. It decides which ways of stopping a sidecar exist there: the
// controller, explain, the simulator's node model and the mock virtual
// node's provider profiles all read it from here.
type Platform string

const (
	// PlatformNode is a kubelet on a machine of the cluster's own: a
	// kruise-daemon may run there, which OpenKruise's NodeImage shows
	// (kube/daemons.go).
	PlatformNode Platform = "node"
	// PlatformEKSFargate is AWS EKS Fargate: one node, with a real kubelet,
	// per pod.
	PlatformEKSFargate Platform = "eks-fargate"
	// PlatformGKEAutopilot is a node of a GKE Autopilot cluster.
	PlatformGKEAutopilot Platform = "gke-autopilot"
	// PlatformAzureACI is virtual-kubelet's Azure Container Instances
	// provider.
	PlatformAzureACI Platform = "azure-aci"
	// PlatformAlibabaECI is Alibaba Cloud's virtual node for Elastic
	// Container Instances (ack-virtual-node).
	PlatformAlibabaECI Platform = "alibaba-eci"
	// PlatformVirtualKubelet is any other virtual-kubelet node: one the
	// virtual-node selector (--virtual-node-selector) matches.
	PlatformVirtualKubelet Platform = "virtual-kubelet"
)

// Platforms lists every platform, for tables and tests.
func Platforms() []Platform {
	return []Platform{PlatformNode, PlatformEKSFargate, PlatformGKEAutopilot, PlatformAzureACI, PlatformAlibabaECI, PlatformVirtualKubelet}
}

// Capabilities are what a platform can do for the ways of stopping a sidecar.
type Capabilities struct {
	// KruiseDaemon: kruise-daemon (a privileged DaemonSet) can run on the
	// platform's nodes, so a ContainerRecreateRequest may be executed there.
	// Where it can, whether it does is OpenKruise's NodeImage signal.
	KruiseDaemon bool
	// ImageUpdate: the node restarts a container whose image the pod's spec
	// changes, so the image swap stops a sidecar.
	ImageUpdate bool
	// NativeSidecars: the node can run init containers with restartPolicy
	// Always (on a kubelet, from its version; never on providers that refuse
	// such init containers).
	NativeSidecars bool
	// SidecarMark is the platform's own way of ending a sidecar, an env
	// "NAME=value" on the container ("" for none): a sidecar carrying it is
	// the platform's to stop, never the controller's.
	SidecarMark string
}

// ECI's own marks (Alibaba Cloud, Elastic Container Instance, "Forcibly
// terminate the sidecar container and ignore the container exit code",
// help/en/eci/user-guide/declaring-container-types): ECI stops a container
// typed sidecar once the pod's other containers have exited and will not
// restart, and reports a container whose exit code it is told to ignore as
// succeeded.
const (
	EnvECIContainerType      = "ECI_CONTAINER_TYPE"
	EnvECIIgnoreExitCode     = "ECI_CONTAINER_IGNORE_EXIT_CODE"
	eciSidecarType           = "sidecar"
	LabelEKSComputeType      = "eks.amazonaws.com/compute-type"
	eksFargateComputeType    = "fargate"
	aciKubeletVersionMarker  = "-vk-azure-aci-"
	aliyunKubeletVersionMark = "aliyun"
	gkeProviderIDPrefix      = "gce://"
	gkeAutopilotNodePrefix   = "gk3-"
)

// Capabilities of each platform, each from the platform's own source or
// documentation.
func (p Platform) Capabilities() Capabilities {
	switch p {
	case PlatformEKSFargate:
		// AWS EKS user guide, "Fargate considerations": DaemonSets are not
		// supported on Fargate; each pod runs on its own node with a
		// kubelet, which restarts a container whose image changes (the
		// kubelet's own rule, pkg/kubelet/kuberuntime computePodActions).
		return Capabilities{ImageUpdate: true, NativeSidecars: true}
	case PlatformGKEAutopilot:
		// GKE docs, "About privileged workloads in Autopilot mode":
		// Autopilot rejects privileged pods unless an allowlist of
		// Google's admits them, and kruise-daemon (privileged, hostPath)
		// is on none. The nodes run GKE's kubelet.
		return Capabilities{ImageUpdate: true, NativeSidecars: true}
	case PlatformAzureACI:
		// virtual-kubelet/azure-aci v1.6.4, pkg/provider/aci.go: UpdatePod
		// is a no-op ("ACI currently does not support live updates of a
		// pod"), so a changed image is never run; init containers with
		// probes, lifecycle hooks or ports are refused (validation in
		// getInitContainers), so native sidecars do not run either. No
		// DaemonSet pod runs on a virtual-kubelet node.
		return Capabilities{}
	case PlatformAlibabaECI:
		// OpenKruise's SidecarTerminator design
		// (docs/proposals/20230130-job-sidecar-terminator.md): on ECI's
		// virtual nodes, where no kruise-daemon runs, it stops a sidecar by
		// an in-place image update to a quick-exit image, which ECI honours.
		// ECI also stops sidecars carrying its own mark (constants above).
		return Capabilities{ImageUpdate: true, SidecarMark: EnvECIContainerType + "=" + eciSidecarType}
	case PlatformVirtualKubelet:
		// A virtual-kubelet provider runs no DaemonSet pod. Whether it
		// honours an image update is the provider's own: the swap is made,
		// and a sidecar that does not end within its bound gets a Warning
		// naming the image the node still reports (swap.go).
		return Capabilities{ImageUpdate: true}
	}
	return Capabilities{KruiseDaemon: true, ImageUpdate: true, NativeSidecars: true}
}

// NodeFacts are what a node says of itself that its platform is known from:
// the only node fields the controller keeps.
type NodeFacts struct {
	Name           string
	Labels         map[string]string
	KubeletVersion string // status.nodeInfo.kubeletVersion
	ProviderID     string // spec.providerID
}

// PlatformOf says which platform a node is, and how that is known. virtual
// is whether the operator's virtual-node selector matches the node's labels.
func PlatformOf(f NodeFacts, virtual bool) (Platform, string) {
	switch {
	case f.Labels[LabelEKSComputeType] == eksFargateComputeType:
		// AWS EKS user guide, Fargate: Fargate nodes carry
		// eks.amazonaws.com/compute-type=fargate.
		return PlatformEKSFargate, fmt.Sprintf("label %s=%s", LabelEKSComputeType, eksFargateComputeType)
	case strings.Contains(f.KubeletVersion, aciKubeletVersionMarker):
		// virtual-kubelet/azure-aci v1.6.4, cmd/virtual-kubelet/main.go:
		// the node's kubeletVersion is "<k8s version>-vk-azure-aci-<build>".
		return PlatformAzureACI, fmt.Sprintf("kubeletVersion %q (azure-aci's own)", bounded(f.KubeletVersion))
	case virtual && strings.Contains(f.KubeletVersion, aliyunKubeletVersionMark):
		// ack-virtual-node registers its nodes (virtual-kubelet-<region>-
		// <zone>) with type=virtual-kubelet and a kubeletVersion of
		// Alibaba's build ("v1.16.9-aliyun.1", as `kubectl get nodes`
		// lists them in Alibaba's own guides); ACK's machines report the
		// same version suffix, so the virtual-node label is needed too.
		return PlatformAlibabaECI, fmt.Sprintf("virtual-node label with kubeletVersion %q (Alibaba's build)", bounded(f.KubeletVersion))
	case strings.HasPrefix(f.ProviderID, gkeProviderIDPrefix) && strings.HasPrefix(f.Name, gkeAutopilotNodePrefix):
		// GKE names Autopilot's machines gk3-<cluster>-... (Standard's are
		// gke-...), and their providerID is gce://<project>/<zone>/<name>.
		return PlatformGKEAutopilot, fmt.Sprintf("providerID %q and a node name starting %q (GKE Autopilot's)", bounded(f.ProviderID), gkeAutopilotNodePrefix)
	case virtual:
		return PlatformVirtualKubelet, "the virtual-node selector matches its labels"
	}
	return PlatformNode, "a kubelet of the cluster's own (no platform's label, version or providerID)"
}

// platform is the node's platform, for a Node built without one (tests,
// older callers): the virtual-node label alone.
func (n Node) platform() Platform {
	switch {
	case n.Platform != "":
		return n.Platform
	case n.Virtual:
		return PlatformVirtualKubelet
	}
	return PlatformNode
}

// Capabilities are the node's platform's.
func (n Node) Capabilities() Capabilities { return n.platform().Capabilities() }

// stopsOne: the platform can stop one container of a running pod, by a CRR
// or by an image swap.
func (c Capabilities) stopsOne() bool { return c.KruiseDaemon || c.ImageUpdate }

// carriesMark reports whether the container carries the platform's own
// sidecar mark.
func (c Container) carriesMark(caps Capabilities) bool {
	return caps.SidecarMark != "" && c.PlatformMark == caps.SidecarMark
}

// platformLine says, for explain, the node's platform and why.
func platformLine(n Node) string {
	p := n.platform()
	why := n.PlatformWhy
	if why == "" {
		why = "the virtual-node selector"
		if p == PlatformNode {
			why = "no platform recognised"
		}
	}
	return fmt.Sprintf("%s (%s)", p, why)
}

// leaveToPlatform makes a regular container that carries the node's
// platform's own sidecar mark a sidecar of the platform's: the controller
// neither waits for it as a main container (the platform stops it only once
// the others have exited, so waiting would deadlock) nor stops it.
func leaveToPlatform(cs []Container, caps Capabilities) []Container {
	if caps.SidecarMark == "" {
		return cs
	}
	for i, c := range cs {
		if c.Role == RoleMain && c.carriesMark(caps) {
			cs[i].Role, cs[i].MarkedBy, cs[i].IgnoreExitCode = RoleSidecar, []string{caps.SidecarMark}, false
		}
	}
	return cs
}

// settleWithoutStop finishes the pod on a node that can stop none of its
// containers (Azure ACI): the phase is settled from the main containers, as
// for ignore-exit-code sidecars, so the Job completes; the sidecars run on
// until the pod is deleted, and a Warning says so and what deletes it. A
// swap there would change the spec and nothing else.
func (p Plan) settleWithoutStop(in Input, mains, running []Container, settled bool) Plan {
	platform := in.Node.platform()
	if settled {
		// A settled pod's regular sidecars are not listed as running
		// (Decide), but they run on all the same.
		return p.with(VerdictDone, fmt.Sprintf("the phase is settled from the main containers; the sidecars run on, on %s node %q, which cannot stop one container, until the pod is deleted",
			platform, in.Node.Name))
	}
	if len(running) == 0 {
		return p.with(VerdictDone, "the main containers are done and every sidecar has terminated")
	}
	if refused, wait := p.settleRefused(in, running); wait {
		return refused
	}
	phase := settledPhase(mains)
	p.Problems = append(p.Problems, Problem{Reason: ReasonSidecarLeftRunning, Message: fmt.Sprintf(
		"node %q is %s, which cannot stop one container of a running pod (no kruise-daemon, and an image change is ignored), so sidecars %v are not stopped: the pod's phase is settled to %s from its main containers so that its Job finishes, but the sidecars keep running, and are billed, until the pod is deleted: set the Job's spec.ttlSecondsAfterFinished to delete it, or make them native sidecars where the node runs them",
		in.Node.Name, platform, names(running), phase)})
	p.Actions = append(p.Actions, Action{Kind: ActionSettlePhase, Containers: names(running), Phase: phase, LeftRunning: true})
	return p.with(VerdictAct, "the main containers are done: "+describeActions(p.Actions))
}

// leftToPlatform waits for sidecars the platform stops itself (ECI's own
// mark), within the bound a swapped sidecar gets; past it, a Warning.
func (p Plan) leftToPlatform(in Input, own []Container) Plan {
	allowance := in.Policy.SwapStartAllowance
	if allowance <= 0 {
		allowance = DefaultPolicy().SwapStartAllowance
	}
	until := p.MainsDoneAt.Add(PodGrace(in.Pod) + allowance)
	mark := in.Node.Capabilities().SidecarMark
	if left := until.Sub(in.Now); left > 0 {
		p.requeue(left)
		return p.with(VerdictInProgress, fmt.Sprintf("sidecars %v carry %s, so %s stops them itself once the other containers have exited; the controller leaves them to it",
			names(own), mark, in.Node.platform()))
	}
	p.Problems = append(p.Problems, Problem{Reason: ReasonNoTerminationPath, Message: fmt.Sprintf(
		"sidecars %v carry %s, but %s has not stopped them since the main containers finished at %s; the controller does not stop a sidecar the platform owns",
		names(own), mark, in.Node.platform(), p.MainsDoneAt.UTC().Format(time.RFC3339))})
	return p.with(VerdictNoPath, fmt.Sprintf("sidecars %v are the platform's to stop, and it has not", names(own)))
}
