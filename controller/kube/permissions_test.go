package kube

import (
	"bytes"
	"context"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	kruisefake "github.com/openkruise/kruise-api/client/clientset/versioned/fake"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

type grant struct{ group, resource, verb string }

func grants(ps []Permission, namespaced bool) map[grant]bool {
	out := map[grant]bool{}
	for _, p := range ps {
		if p.Namespaced != namespaced {
			continue
		}
		for _, v := range p.Verbs {
			out[grant{p.Group, p.Resource, v}] = true
		}
	}
	return out
}

func rulesGrants(t *testing.T, rules []rbacv1.PolicyRule) map[grant]bool {
	out := map[grant]bool{}
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					if g == "*" || res == "*" || v == "*" {
						t.Errorf("wildcard in rule %+v", r)
					}
					out[grant{g, res, v}] = true
				}
			}
		}
	}
	return out
}

func sortedKeys(m map[grant]bool) []string {
	var out []string
	for g := range m {
		out = append(out, g.group+"/"+g.resource+":"+g.verb)
	}
	sort.Strings(out)
	return out
}

// TestDeployRBACGrantsExactlyWhatTheCodeCalls reads the deploy manifests and
// compares their grant with Permissions, the list kept beside the code.
func TestDeployRBACGrantsExactlyWhatTheCodeCalls(t *testing.T) {
	raw, err := os.ReadFile("../deploy/base/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var clusterRules, roleRules []rbacv1.PolicyRule
	dec := utilyaml.NewDocumentDecoder(nopCloser{bytes.NewReader(raw)})
	buf := make([]byte, 1<<20)
	for {
		n, err := dec.Read(buf)
		if err != nil {
			break
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(buf[:n], &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			if err := yaml.UnmarshalStrict(buf[:n], &r); err != nil {
				t.Fatal(err)
			}
			clusterRules = append(clusterRules, r.Rules...)
		case "Role":
			var r rbacv1.Role
			if err := yaml.UnmarshalStrict(buf[:n], &r); err != nil {
				t.Fatal(err)
			}
			roleRules = append(roleRules, r.Rules...)
		}
	}
	if got, want := sortedKeys(rulesGrants(t, clusterRules)), sortedKeys(grants(Permissions, false)); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("ClusterRole grants\n %v\nthe code needs\n %v", got, want)
	}
	if got, want := sortedKeys(rulesGrants(t, roleRules)), sortedKeys(grants(Permissions, true)); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("Role grants\n %v\nthe code needs\n %v", got, want)
	}
}

// TestCallsStayWithinPermissions runs the informers, every kind of write and
// the live reader against fake clientsets, and checks that each call they
// record is in Permissions.
func TestCallsStayWithinPermissions(t *testing.T) {
	pods := []*corev1.Pod{
		jobPod("crr", podtest.Env(decision.EnvTerminate, "true")).Build(),
		jobPod("swap", podtest.Env(decision.EnvTerminateWithImage, quickExit)).Build(),
		jobPod("settle", podtest.Env(decision.EnvTerminate, "true"), podtest.Env(decision.EnvIgnoreExitCode, "true")).Build(),
	}
	f := newFixture(t, pods, normalNode)
	allowed := grants(Permissions, false)
	var calls []k8stesting.Action
	for _, p := range pods {
		f.sync(p.Name)
		calls = append(calls, f.client.Actions()...)
		calls = append(calls, f.kruise.Actions()...)
	}

	// Informers list and watch.
	client, kruise := fake.NewClientset(), kruisefake.NewSimpleClientset()
	scheme := runtime.NewScheme()
	metav1.AddMetaToScheme(scheme)
	meta := metadatafake.NewSimpleMetadataClient(scheme)
	caches, err := NewCaches(client, meta, kruise, true)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	caches.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), caches.Synced()...) {
		t.Fatalf("informers did not sync: pods %t, nodes %t, CRRs %t",
			caches.PodInformer.HasSynced(), caches.NodeInformer.HasSynced(), caches.CRRInformer.HasSynced())
	}
	live := LiveReader{Client: client, Kruise: kruise, CRRAPI: true}
	live.Node("node-1")
	live.CRRs(pods[0])
	live.Pod("default", "crr")
	time.Sleep(10 * time.Millisecond) // let the informers' watch calls land in the recorder
	calls = append(calls, client.Actions()...)
	calls = append(calls, kruise.Actions()...)
	calls = append(calls, meta.Actions()...)

	if len(calls) < 10 {
		t.Fatalf("only %d calls recorded; the test exercises too little", len(calls))
	}
	for _, a := range calls {
		res := a.GetResource().Resource
		if a.GetSubresource() != "" {
			res += "/" + a.GetSubresource()
		}
		if !allowed[grant{a.GetResource().Group, res, a.GetVerb()}] {
			t.Errorf("call %s %s/%s is not in Permissions", a.GetVerb(), a.GetResource().Group, res)
		}
	}
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }
