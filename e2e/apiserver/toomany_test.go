package apiserver

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// The API server's Priority and Fairness, not a client-side limiter, holds
// the controller back: here a priority level of 1 share, no borrowing and no
// queue (limitResponse Reject) takes the controller's pod patches and CRR
// creates, so a burst of finished pods meets 429s with Retry-After
// (k8s.io/apiserver v0.35.4, pkg/server/filters/priority-and-fairness.go:
// tooManyRequests). Every pod is still acted on, exactly once (no write lands
// twice), and the rejected attempts per pod stay bounded: client-go resends a
// 429 after the server's Retry-After, and a write still refused waits the
// pod's own backoff, so no pod is a retry storm.
func TestTooManyRequestsAreWaitedOutNotStormed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, true)
	const level = "st-e2e-tiny"
	zero := int32(0)
	if _, err := e.kube.FlowcontrolV1().PriorityLevelConfigurations().Create(ctx, &flowcontrolv1.PriorityLevelConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: level},
		Spec: flowcontrolv1.PriorityLevelConfigurationSpec{Type: flowcontrolv1.PriorityLevelEnablementLimited,
			Limited: &flowcontrolv1.LimitedPriorityLevelConfiguration{NominalConcurrencyShares: ptr(int32(1)), LendablePercent: &zero,
				BorrowingLimitPercent: &zero, LimitResponse: flowcontrolv1.LimitResponse{Type: flowcontrolv1.LimitResponseTypeReject}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Only the controller's writes: its informers' lists and watches, and
	// its events, go on as before.
	if _, err := e.kube.FlowcontrolV1().FlowSchemas().Create(ctx, &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{Name: level},
		Spec: flowcontrolv1.FlowSchemaSpec{PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: level},
			MatchingPrecedence: 500, DistinguisherMethod: &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
			Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
				Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindServiceAccount,
					ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: cluster.ControllerNamespace, Name: cluster.ControllerName}}},
				ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"create", "patch"}, APIGroups: []string{"", "apps.kruise.io"},
					Resources: []string{"pods", "containerrecreaterequests"}, Namespaces: []string{"*"}}},
			}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.createNode(t, ctx, "normal-1", map[string]string{"kubernetes.io/hostname": "normal-1"})
	e.createNode(t, ctx, "virtual-1", map[string]string{"type": "virtual-kubelet"})
	// The API server reads its flow-control objects through an informer: give
	// it a moment before the burst.
	time.Sleep(2 * time.Second)

	// The burst: finished pods written by 16 clients at once, so that the
	// controller's workers write concurrently.
	const n = 200
	var wg sync.WaitGroup
	slots := make(chan struct{}, 16)
	errs := make(chan error, n)
	for i := range n {
		node, env := "normal-1", envCRR
		if i%2 == 1 {
			node, env = "virtual-1", envImage
		}
		pod := jobPod(fmt.Sprintf("burst-%03d", i), node, true, env)
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			status := pod.Status
			created, err := e.kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
			if err == nil {
				created.Status = status
				_, err = e.kube.CoreV1().Pods("default").UpdateStatus(ctx, created, metav1.UpdateOptions{})
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	waitUntilFor(t, ctx, 5*time.Minute, "every pod of the burst acted on", func(ctx context.Context) (bool, error) {
		for i := range n {
			name := fmt.Sprintf("burst-%03d", i)
			if i%2 == 1 {
				p, err := e.kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
				if err != nil || p.Spec.Containers[1].Image != quickExit {
					return false, err
				}
				continue
			}
			p, err := e.kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if _, err := e.kruise.AppsV1alpha1().ContainerRecreateRequests("default").Get(ctx, decision.CRRName(p, 1), metav1.GetOptions{}); err != nil {
				if apierrors.IsNotFound(err) {
					return false, nil
				}
				return false, err
			}
		}
		return true, nil
	})
	time.Sleep(2 * time.Second) // the audit log is written in 1 s batches

	// A create the API server refused before reading its body has no name
	// in the audit log ("-"): those are counted per burst, not per pod.
	accepted, rejected := map[string]int{}, map[string]int{}
	rejectedCreates := 0
	for _, w := range e.controllerWrites(t) {
		f := strings.Fields(w) // verb resource name code
		if len(f) != 4 {
			continue
		}
		pod := f[2]
		if f[1] == "containerrecreaterequests" && len(pod) > len("burst-NNN") {
			pod = pod[:len("burst-NNN")]
		}
		switch {
		case f[3] == "200" || f[3] == "201":
			accepted[pod]++
		case f[3] == "429" && pod == "-":
			rejectedCreates++
		case f[3] == "429":
			rejected[pod]++
		default:
			t.Errorf("controller write %q: want 200, 201 or 429", w)
		}
	}
	total, worst := rejectedCreates, 0
	for _, c := range rejected {
		total += c
		worst = max(worst, c)
	}
	t.Logf("%d pods: %d writes accepted, %d answered 429 (%d patches over %d pods, at most %d for one pod; %d CRR creates)",
		n, len(accepted), total, total-rejectedCreates, len(rejected), worst, rejectedCreates)
	if total == 0 {
		t.Fatalf("no write was answered 429: the test's priority level did not hold the burst back")
	}
	for pod, c := range accepted {
		if c != 1 {
			t.Errorf("pod %s: %d accepted writes, want exactly 1", pod, c)
		}
	}
	if len(accepted) != n {
		t.Errorf("%d pods with an accepted write, want %d", len(accepted), n)
	}
	// client-go resends a 429 up to 10 times, each after the server's
	// Retry-After (1 s here); a pod whose write is still refused then waits
	// its own backoff (5 s, doubling), by then long past this burst.
	const bound = 2 * 11
	if worst > bound {
		t.Errorf("a pod's write was answered 429 %d times: more than %d is a retry storm", worst, bound)
	}
	if rejectedCreates > bound*n/2 {
		t.Errorf("%d CRR creates answered 429 for %d pods: more than %d each is a retry storm", rejectedCreates, n/2, bound)
	}
}
