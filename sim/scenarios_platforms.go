package sim

import (
	"time"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

func init() { Scenarios = append(Scenarios, platformScenarios...) }

// platformNodes has a group of every platform (decision/platform.go): each
// node says what that platform's nodes say and behaves as it does.
var platformNodes = []NodeGroup{{Count: 10}, {Count: 10, Platform: decision.PlatformEKSFargate}, {Count: 5, Platform: decision.PlatformGKEAutopilot},
	{Count: 5, Platform: decision.PlatformAzureACI}, {Count: 5, Platform: decision.PlatformAlibabaECI}, {Count: 5, Platform: decision.PlatformVirtualKubelet}}

// platformTemplates are the platform cases the scenario and the soak share:
// those of the platforms with a node group of their own (platformNodes[1:5]).
func platformTemplates() []Template {
	return []Template{
		// EKS Fargate and GKE Autopilot: no kruise-daemon can run, so the
		// swap at once, even for a sidecar marked for a CRR, and never a
		// CRR (a young Fargate node's NodeImage is within the grace).
		never("fargate", job(), sidecar("proxy", "exit:0", markCRR, markImage)).on(decision.PlatformEKSFargate),
		onFailure("fargate-of", job(), sidecar("proxy", "ignore", markImage)).on(decision.PlatformEKSFargate),
		never("fargate-none", job(), sidecar("proxy", "exit:0", markCRR)).on(decision.PlatformEKSFargate).expect(ExpectWarning),
		never("autopilot", job(), sidecar("proxy", "exit:0", markCRR, markImage)).on(decision.PlatformGKEAutopilot),
		// Azure ACI: nothing stops one container; the phase is settled from
		// the mains with a Warning, and the sidecar runs on.
		never("aci", job(), sidecar("proxy", "exit:0", markImage)).on(decision.PlatformAzureACI).expect(ExpectWarnedTerminal),
		never("aci-failed", mainC("main", 5*time.Second, 30*time.Second, 3), sidecar("proxy", "exit:0", markCRR)).on(decision.PlatformAzureACI).expect(ExpectWarnedTerminal),
		never("aci-ignore", job(), sidecar("logger", "ignore", markImage, markIgnore)).on(decision.PlatformAzureACI).expect(ExpectWarnedTerminal),
		// Alibaba ECI: the swap.
		never("eci", job(), sidecar("proxy", "exit:0", markImage)).on(decision.PlatformAlibabaECI),
		onFailure("eci-of", job(), sidecar("proxy", "ignore", markCRR, markImage)).on(decision.PlatformAlibabaECI),
	}
}

var platformScenarios = []Scenario{
	{Name: "platforms", Purpose: "a node of every platform: Fargate and Autopilot swap at once and get no CRR, ACI settles the phase with a Warning, ECI and virtual-kubelet swap, normal nodes keep the CRR",
		Nodes: platformNodes, Templates: append(platformTemplates(),
			// A generic provider swaps; a normal node beside them keeps its
			// CRR. (The soak has its own of both, with their faults.)
			never("vk", job(), sidecar("proxy", "exit:0", markImage)).on(decision.PlatformVirtualKubelet),
			never("node-crr", job(), sidecar("proxy", "exit:0", markCRR)))},
}
