package sim

import (
	"fmt"
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/sim/model"
)

// platformNode makes n say what a node of platform p says of itself (the
// facts decision.PlatformOf reads, as each platform's own nodes report
// them: see decision/platform.go for the sources) and behave as p's
// capabilities say. It panics when the facts would not be recognised as p:
// the simulated platform must be the one the controller sees.
func (w *World) platformNode(n *node, p decision.Platform, group, i int, timings *model.Timings) {
	virtualLabel := map[string]string{"type": "virtual-kubelet", "kubernetes.io/role": "agent"}
	switch p {
	case decision.PlatformEKSFargate:
		n.name = fmt.Sprintf("fargate-ip-10-%d-%d-1.ec2.internal", group, i)
		n.labels = map[string]string{decision.LabelEKSComputeType: "fargate", "kubernetes.io/os": "linux"}
		n.facts.KubeletVersion, n.facts.ProviderID = "v1.33.5-eks-ecaa3a6", "aws:///us-east-1a/"+n.name
		n.young = true // one node per pod, made for it
	case decision.PlatformGKEAutopilot:
		n.name = fmt.Sprintf("gk3-sim-pool-%d-%d", group, i)
		n.facts.KubeletVersion, n.facts.ProviderID = "v1.33.5-gke.1000", "gce://sim/us-central1-a/"+n.name
	case decision.PlatformAzureACI:
		n.name, n.virtual, n.labels = fmt.Sprintf("virtual-node-aci-linux-%d-%d", group, i), true, virtualLabel
		n.facts.KubeletVersion = "v1.25.0-vk-azure-aci-1.6.4"
	case decision.PlatformAlibabaECI:
		n.name, n.virtual, n.labels = fmt.Sprintf("virtual-kubelet-cn-hangzhou-%d-%d", group, i), true, virtualLabel
		n.facts.KubeletVersion = "v1.16.9-aliyun.1"
	case decision.PlatformVirtualKubelet:
		n.name, n.virtual, n.labels = fmt.Sprintf("virtual-%d-%d", group, i), true, virtualLabel
	}
	if n.virtual {
		timings.Pull, n.kubeletLag = 5*time.Second, time.Second
	}
	n.facts.Name, n.facts.Labels = n.name, n.labels
	caps := p.Capabilities()
	n.ignoresImageUpdates = n.ignoresImageUpdates || !caps.ImageUpdate
	n.runsOnWhenTerminal = n.virtual && !caps.ImageUpdate
	if got, why := decision.PlatformOf(n.facts, n.virtual); got != p {
		panic(fmt.Sprintf("node %s is recognised as %s (%s), not %s", n.name, got, why, p))
	}
}

// placement is the kind of node a template's pods go to.
func placement(p decision.Platform, virtual bool) decision.Platform {
	switch {
	case p != "":
		return p
	case virtual:
		return decision.PlatformVirtualKubelet
	}
	return decision.PlatformNode
}
