package sim

import (
	"sort"
	"time"

	kruisev1alpha1 "github.com/openkruise/kruise-api/apps/v1alpha1"
	"k8s.io/client-go/tools/cache"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/kruisetest"
)

// WebhookAnswer is how kruise's CRR webhook (failurePolicy Fail), or the API
// server in front of it, answers CRR creates while a fault lasts. The
// answers themselves are kruisetest's, as the controller's tests see them.
type WebhookAnswer string

const (
	// WebhookAdmits: kruisetest.Admit decides, as on a healthy cluster.
	WebhookAdmits WebhookAnswer = ""
	// WebhookDown: kruise-manager is down; the API server answers 500.
	WebhookDown WebhookAnswer = "down"
	// WebhookGateOff: kruise-manager runs with its KruiseDaemon feature gate
	// off, so every create is denied with 403 while discovery still serves
	// the API.
	WebhookGateOff WebhookAnswer = "gate-off"
	// WebhookLagging: the webhook's own pod cache lags, so it finds no
	// container ID for the target and answers 400.
	WebhookLagging WebhookAnswer = "lagging"
	// CRDRemoved: OpenKruise's CRD is deleted at CRRWebhookFrom, for good:
	// its CRRs go with it, creates answer 404, and discovery stops serving
	// the API (a controller learns it when it looks again).
	CRDRemoved WebhookAnswer = "crd-removed"
)

// scheduleCRDRemoval deletes the CRD at the fault's start.
func (s *Sim) scheduleCRDRemoval() {
	f := s.sc.Faults
	if f.CRRWebhook != CRDRemoved {
		return
	}
	s.at(Epoch.Add(f.CRRWebhookFrom), func() {
		w := s.world
		w.crdRemoved = true
		s.trace.add("cluster", "OpenKruise's ContainerRecreateRequest CRD removed")
		keys := make([]cache.ObjectName, 0, len(w.crrs))
		for k := range w.crrs {
			keys = append(keys, k)
		}
		sortKeys(keys)
		for _, k := range keys {
			w.deleteCRR(k, "CRD removed")
		}
	})
}

// webhookRefusal is the fault's answer to a CRR create now, or nil when the
// create goes on to kruise's ordinary admission.
func (s *Sim) webhookRefusal(crr *kruisev1alpha1.ContainerRecreateRequest) error {
	f := s.sc.Faults
	if f.CRRWebhook == CRDRemoved {
		if s.world.crdRemoved {
			return kruisetest.CRDGone()
		}
		return nil
	}
	from := Epoch.Add(f.CRRWebhookFrom)
	if f.CRRWebhook == WebhookAdmits || s.now().Before(from) || (f.CRRWebhookFor > 0 && !s.now().Before(from.Add(f.CRRWebhookFor))) {
		return nil
	}
	switch f.CRRWebhook {
	case WebhookDown:
		return kruisetest.WebhookDown()
	case WebhookGateOff:
		return kruisetest.FeatureGateOff()
	case WebhookLagging:
		return kruisetest.PodCacheLagging(crr.Spec.Containers[0].Name)
	}
	return nil
}

// crrServed is what discovery answers now about the CRR API.
func (s *Sim) crrServed() bool { return !s.sc.NoCRRAPI && !s.world.crdRemoved }

// RediscoverCRRAPI implements reconciler.Reader's: the controller
// asks discovery again after a CRR create answered 404.
func (c *Cache) RediscoverCRRAPI() {
	if c.served != nil {
		c.crrAPI = c.served()
	}
}

// crrTTL is how long after it finished kruise deletes a CRR: the CRR's own
// ttlSecondsAfterFinished, or sooner under the CRRTTL fault (a CRR deleted
// while its pod still runs).
func (s *Sim) crrTTL(crr *kruisev1alpha1.ContainerRecreateRequest) (time.Duration, bool) {
	if ttl := s.sc.Faults.CRRTTL; ttl > 0 {
		return ttl, true
	}
	if ttl := crr.Spec.TTLSecondsAfterFinished; ttl != nil {
		return time.Duration(*ttl) * time.Second, true
	}
	return 0, false
}

func sortKeys(keys []cache.ObjectName) {
	sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
}

// KruiseDaemon implements reconciler.Reader's as kube.Caches does: the
// simulated nodes exist long before the run, so a node without kruise-daemon
// shows as one at once (its NodeImage old and never written by a daemon), a
// node with one as served, and without OpenKruise nothing is known.
func (c *Cache) KruiseDaemon(node string, _ time.Time, _ time.Duration) (decision.DaemonState, string) {
	switch {
	case !c.nodeImages:
		return decision.DaemonUnknown, "OpenKruise's NodeImage API is not served"
	case c.young[node]:
		return decision.DaemonUnknown, "the node's NodeImage is younger than the grace and kruise-daemon has not written it"
	case c.noDaemon[node]:
		return decision.DaemonAbsent, "kruise-daemon never wrote the node's NodeImage"
	}
	return decision.DaemonServes, "kruise-daemon wrote the node's NodeImage status"
}
