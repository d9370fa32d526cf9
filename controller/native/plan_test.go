package native

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	pt "github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
)

const terminate = decision.EnvTerminate

// node makes a node with that kubelet version, labels and taints.
func node(name, kubelet string, lbls map[string]string, taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status:     corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: kubelet}},
	}
}

// unscheduled is the pod as admission sees it: no node, no status.
func unscheduled(b *pt.Builder) *corev1.Pod {
	pod := b.Node("").Build()
	pod.Status = corev1.PodStatus{}
	return pod
}

func config() Config {
	return Config{VirtualNodes: labels.SelectorFromSet(labels.Set{"type": "virtual-kubelet"}), ServerVersion: "v1.37.2"}
}

var (
	newNode     = node("new", "v1.37.2", map[string]string{"pool": "new"})
	otherNew    = node("new-2", "v1.33.0-eks-abc", map[string]string{"pool": "new"})
	oldNode     = node("old", "v1.28.9", map[string]string{"pool": "old"})
	virtualNode = node("vk", "v1.37.2-vk-mock", map[string]string{"type": "virtual-kubelet"},
		corev1.Taint{Key: "virtual-kubelet.io/provider", Value: "mock", Effect: corev1.TaintEffectNoSchedule})
	gpuOld = node("gpu-old", "v1.28.0", map[string]string{"pool": "gpu"},
		corev1.Taint{Key: "gpu", Effect: corev1.TaintEffectNoSchedule})
)

func TestDecide(t *testing.T) {
	cases := map[string]struct {
		pod   *corev1.Pod
		nodes []*corev1.Node
		cfg   func(*Config)

		convert    bool
		initOrder  []string
		moves      map[string]bool // marked container -> moves
		reasonHas  string
		problemsOf []string
	}{
		"OpenKruise's env mark on every new node": {
			pod:     unscheduled(pt.Pod("p").Container("main").Container("proxy", pt.Env(terminate, "true"))),
			nodes:   []*corev1.Node{newNode, otherNew},
			convert: true, initOrder: []string{"proxy"}, moves: map[string]bool{"proxy": true},
			reasonHas: "new, new-2",
		},
		"the image mark alone is a sidecar mark too": {
			pod:     unscheduled(pt.Pod("p").OnFailure().Container("main").Container("proxy", pt.Env(decision.EnvTerminateWithImage, "example.com/quick:1"))),
			nodes:   []*corev1.Node{newNode},
			convert: true, initOrder: []string{"proxy"}, moves: map[string]bool{"proxy": true},
		},
		"not Job-like: restartPolicy Always": {
			pod:       unscheduled(pt.Pod("p").RestartPolicy(corev1.RestartPolicyAlways).Container("main").Container("proxy", pt.Env(terminate, "true"))),
			nodes:     []*corev1.Node{newNode},
			reasonHas: "not a Job-like pod",
		},
		"no marked container: nothing to do, mains stay": {
			pod:       unscheduled(pt.Pod("p").Container("main").Container("other")),
			nodes:     []*corev1.Node{newNode},
			reasonHas: "no regular container is marked",
		},
		"every container marked: no main container": {
			pod:       unscheduled(pt.Pod("p").Container("a", pt.Env(terminate, "true")).Container("b", pt.Env(terminate, "true"))),
			nodes:     []*corev1.Node{newNode},
			moves:     map[string]bool{"a": false, "b": false},
			reasonHas: "no main container",
		},
		"one old node the pod may land on": {
			pod:       unscheduled(pt.Pod("p").Container("main").Container("proxy", pt.Env(terminate, "true"))),
			nodes:     []*corev1.Node{newNode, oldNode},
			moves:     map[string]bool{"proxy": false},
			reasonHas: "node old runs kubelet v1.28.9",
		},
		"the node selector keeps it off the old node": {
			pod: func() *corev1.Pod {
				p := unscheduled(pt.Pod("p").Container("main").Container("proxy", pt.Env(terminate, "true")))
				p.Spec.NodeSelector = map[string]string{"pool": "new"}
				return p
			}(),
			nodes:   []*corev1.Node{newNode, otherNew, oldNode},
			convert: true, initOrder: []string{"proxy"}, moves: map[string]bool{"proxy": true},
		},
		"required node affinity keeps it off the old node": {
			pod: func() *corev1.Pod {
				p := unscheduled(pt.Pod("p").Container("main").Container("proxy", pt.Env(terminate, "true")))
				p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "pool", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"old"}}}}}}}}
				return p
			}(),
			nodes:   []*corev1.Node{newNode, oldNode},
			convert: true, initOrder: []string{"proxy"}, moves: map[string]bool{"proxy": true},
		},
		"an untolerated taint keeps it off the old node": {
			pod:     unscheduled(pt.Pod("p").Container("main").Container("proxy", pt.Env(terminate, "true"))),
			nodes:   []*corev1.Node{newNode, gpuOld},
			convert: true, initOrder: []string{"proxy"},
		},
		"a tolerated taint lets it on the old node": {
			pod: func() *corev1.Pod {
				p := unscheduled(pt.Pod("p").Container("main").Container("proxy", pt.Env(terminate, "true")))
				p.Spec.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
				return p
			}(),
			nodes:     []*corev1.Node{newNode, gpuOld},
			reasonHas: "node gpu-old runs kubelet v1.28.0",
		},
		"a virtual node it tolerates": {
			pod: func() *corev1.Pod {
				p := unscheduled(pt.Pod("p").Container("main").Container("proxy", pt.Env(terminate, "true")))
				p.Spec.Tolerations = []corev1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: corev1.TolerationOpExists}}
				return p
			}(),
			nodes:     []*corev1.Node{newNode, virtualNode},
			reasonHas: "virtual-kubelet node",
		},
		"a virtual node it does not tolerate does not count": {
			pod:     unscheduled(pt.Pod("p").Container("main").Container("proxy", pt.Env(terminate, "true"))),
			nodes:   []*corev1.Node{newNode, virtualNode},
			convert: true, initOrder: []string{"proxy"},
		},
		"nodeName set: only that node counts": {
			pod:     pt.Pod("p").Node("new").Container("main").Container("proxy", pt.Env(terminate, "true")).Build(),
			nodes:   []*corev1.Node{newNode, oldNode},
			convert: true, initOrder: []string{"proxy"},
		},
		"nodeName set to the virtual node": {
			pod:       pt.Pod("p").Node("vk").Container("main").Container("proxy", pt.Env(terminate, "true")).Build(),
			nodes:     []*corev1.Node{newNode, virtualNode},
			reasonHas: "virtual-kubelet node",
		},
		"nodeName set to a node not known": {
			pod:       pt.Pod("p").Node("gone").Container("main").Container("proxy", pt.Env(terminate, "true")).Build(),
			nodes:     []*corev1.Node{newNode},
			reasonHas: "no known node",
		},
		"no node at all": {
			pod:       unscheduled(pt.Pod("p").Container("main").Container("proxy", pt.Env(terminate, "true"))),
			reasonHas: "no known node",
		},
		"an unreadable kubelet version": {
			pod:       unscheduled(pt.Pod("p").Container("main").Container("proxy", pt.Env(terminate, "true"))),
			nodes:     []*corev1.Node{node("x", "", nil)},
			reasonHas: "no readable kubelet version",
		},
		"an old API server drops restartPolicy": {
			pod:       unscheduled(pt.Pod("p").Container("main").Container("proxy", pt.Env(terminate, "true"))),
			nodes:     []*corev1.Node{newNode},
			cfg:       func(c *Config) { c.ServerVersion = "v1.28.3" },
			reasonHas: "API server runs v1.28.3",
		},
		"annotation-only sidecar stays unless allowed": {
			pod: unscheduled(pt.Pod("p").Annotate(decision.AnnotationSidecars, "istio-proxy").
				Container("main").Container("istio-proxy").Container("log", pt.Env(terminate, "true"))),
			nodes:   []*corev1.Node{newNode},
			convert: true, initOrder: []string{"log"}, moves: map[string]bool{"istio-proxy": false, "log": true},
		},
		"annotation-only sidecar moves when allowed": {
			pod:     unscheduled(pt.Pod("p").Annotate(decision.AnnotationSidecars, "istio-proxy").Container("main").Container("istio-proxy")),
			nodes:   []*corev1.Node{newNode},
			cfg:     func(c *Config) { c.AllowAnnotated = true },
			convert: true, initOrder: []string{"istio-proxy"}, moves: map[string]bool{"istio-proxy": true},
		},
		"a postStart hook stays": {
			pod: func() *corev1.Pod {
				p := unscheduled(pt.Pod("p").Container("main").Container("proxy", pt.Env(terminate, "true")))
				p.Spec.Containers[1].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"wait"}}}}
				return p
			}(),
			nodes:     []*corev1.Node{newNode},
			moves:     map[string]bool{"proxy": false},
			reasonHas: "no marked sidecar can move",
		},
		"a restart policy of its own stays": {
			pod:   unscheduled(pt.Pod("p").Container("main").Container("proxy", pt.Env(terminate, "true"), pt.Policy(corev1.ContainerRestartPolicyNever))),
			nodes: []*corev1.Node{newNode},
			moves: map[string]bool{"proxy": false},
		},
		"stop-order becomes the reverse start order, unnamed start last": {
			pod: unscheduled(pt.Pod("p").Annotate(decision.AnnotationStopOrder, "shipper,proxy").
				Container("proxy", pt.Env(terminate, "true")).Container("main").Container("shipper", pt.Env(terminate, "true")).Container("metrics", pt.Env(terminate, "true"))),
			nodes:   []*corev1.Node{newNode},
			convert: true, initOrder: []string{"proxy", "shipper", "metrics"},
		},
		"stop-order naming a sidecar that must stay: nothing moves": {
			pod: func() *corev1.Pod {
				p := unscheduled(pt.Pod("p").Annotate(decision.AnnotationStopOrder, "shipper,proxy").
					Container("main").Container("shipper", pt.Env(terminate, "true")).Container("proxy", pt.Env(terminate, "true")))
				p.Spec.Containers[2].Lifecycle = &corev1.Lifecycle{PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"wait"}}}}
				return p
			}(),
			nodes:     []*corev1.Node{newNode},
			moves:     map[string]bool{"shipper": false, "proxy": false},
			reasonHas: "names proxy, which cannot move",
		},
		"a bad env value: no conversion, a problem": {
			pod: unscheduled(pt.Pod("p").Container("main").Container("proxy", pt.Env(terminate, "true")).
				Container("log", pt.Env(terminate, "yes"))),
			nodes:      []*corev1.Node{newNode},
			reasonHas:  "marks have problems",
			problemsOf: []string{decision.ReasonInvalidSidecarEnv},
		},
		"an unknown name in the sidecars annotation": {
			pod: unscheduled(pt.Pod("p").Annotate(decision.AnnotationSidecars, "nope").
				Container("main").Container("proxy", pt.Env(terminate, "true"))),
			nodes:      []*corev1.Node{newNode},
			problemsOf: []string{decision.ReasonUnknownSidecarName},
		},
		"a bad stop order": {
			pod: unscheduled(pt.Pod("p").Annotate(decision.AnnotationStopOrder, "main").
				Container("main").Container("proxy", pt.Env(terminate, "true"))),
			nodes:      []*corev1.Node{newNode},
			problemsOf: []string{decision.ReasonInvalidStopOrder},
		},
		"a near miss of a mark": {
			pod: unscheduled(pt.Pod("p").Container("main", pt.Env("KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXlT", "true")).
				Container("proxy", pt.Env(terminate, "true"))),
			nodes:      []*corev1.Node{newNode},
			problemsOf: []string{decision.ReasonNearMissMark},
		},
		"a quick-exit image problem does not block": {
			pod: unscheduled(pt.Pod("p").Container("main").
				Container("proxy", pt.Env(decision.EnvTerminateWithImage, "not a reference"))),
			nodes:   []*corev1.Node{newNode},
			convert: true, initOrder: []string{"proxy"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := config()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			before := tc.pod.DeepCopy()
			p := Decide(tc.pod, tc.nodes, cfg)
			if diff := cmp.Diff(before, tc.pod); diff != "" {
				t.Fatalf("Decide changed the pod (-before +after):\n%s", diff)
			}
			if p.Convert != tc.convert {
				t.Fatalf("Convert = %v, want %v (reason %q)", p.Convert, tc.convert, p.Reason)
			}
			if diff := cmp.Diff(tc.initOrder, p.InitOrder); diff != "" {
				t.Errorf("InitOrder (-want +got):\n%s", diff)
			}
			for n, want := range tc.moves {
				found := false
				for _, c := range p.Containers {
					if c.Name == n {
						found = true
						if c.Move != want || c.Reason == "" {
							t.Errorf("container %s: Move = %v (%q), want %v with a reason", n, c.Move, c.Reason, want)
						}
					}
				}
				if !found {
					t.Errorf("container %s has no plan", n)
				}
			}
			if !strings.Contains(p.Reason, tc.reasonHas) {
				t.Errorf("Reason = %q, want it to contain %q", p.Reason, tc.reasonHas)
			}
			var got []string
			for _, pr := range p.Problems {
				got = append(got, pr.Reason)
			}
			if diff := cmp.Diff(tc.problemsOf, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
			// A main container never moves.
			for _, c := range p.Containers {
				if c.Move && c.Name == "main" {
					t.Errorf("the main container is planned to move")
				}
			}
		})
	}
}
