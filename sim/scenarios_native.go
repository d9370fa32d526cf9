package sim

import (
	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

func init() { Scenarios = append(Scenarios, nativeScenarios...) }

func (t Template) nativeOptIn() Template { t.NativeOptIn = true; return t }
func (t Template) webhookDown() Template { t.WebhookDown = true; return t }

// The native-sidecar webhook at admission (admission.go): opted-in pods the
// controller's conversion accepts run their sidecars as native ones and
// finish with no write of the controller's; those it refuses, and those
// admitted while it is down, finish through the kill path as before.
var nativeScenarios = []Scenario{
	{Name: "native-admission", Purpose: "opted-in pods converted to native sidecars at admission finish with no write of the controller's; a virtual node's, a bad mark's and a webhook-down pod's finish through the kill path",
		Nodes: mixedNodes, Templates: []Template{
			never("nat-crr", job(), sidecar("proxy", "exit:0", markCRR)).nativeOptIn(),
			onFailure("nat-of", job(), sidecar("proxy", "exit:0", markCRR, markImage)).nativeOptIn(),
			never("nat-order", job(), sidecar("shipper", "exit:0", markCRR), sidecar("proxy", "exit:0", markCRR)).
				annotate(decision.AnnotationStopOrder, "shipper,proxy").nativeOptIn(),
			never("nat-ignore", job(), sidecar("logger", "ignore", markCRR, markIgnore)).nativeOptIn(),
			never("nat-vk", job(), sidecar("proxy", "exit:0", markImage)).virtual().nativeOptIn(),
			never("nat-bad-order", job(), sidecar("proxy", "exit:0", markCRR)).annotate(decision.AnnotationStopOrder, "proxy,main").nativeOptIn(),
			never("nat-down", job(), sidecar("proxy", "exit:0", markCRR)).nativeOptIn().webhookDown(),
			never("nat-off", job(), sidecar("proxy", "exit:0", markCRR))}},
}
