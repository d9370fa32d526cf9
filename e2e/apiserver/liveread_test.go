package apiserver

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
	"github.com/sidecar-terminator/sidecar-terminator/controller/podtest"
	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// crrReads lists the controller's GETs of CRRs as the audit log recorded
// them (the control plane logs them: e2e/cluster's audit policy), by name.
func (e *env) crrReads(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(e.audit)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var a struct {
			Stage     string                          `json:"stage"`
			Verb      string                          `json:"verb"`
			User      struct{ Username string }       `json:"user"`
			ObjectRef struct{ Resource, Name string } `json:"objectRef"`
		}
		if json.Unmarshal(sc.Bytes(), &a) != nil || a.Stage != "ResponseComplete" || a.Verb != "get" ||
			a.User.Username != cluster.ControllerServiceAccountUser || a.ObjectRef.Resource != "containerrecreaterequests" {
			continue
		}
		out = append(out, a.ObjectRef.Name)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The happy path reads no CRR live: a pod stopped by one CRR costs one
// write and no read beyond the informers, and so does each stage of an
// ordered pod (its CRR, and the delete of the one before) for a controller
// that watched the pod since before its main exited: it saw every CRR of the
// stop, in the cache or as its own write, so no plan names one to confirm
// (controller/decision/confirm.go; controller/reconciler,
// TestAnOrderedPodsHappyPathReadsNoCRRLive).
func TestTheHappyPathReadsNoCRRLive(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e := startEnv(t, ctx, true)
	e.createNode(t, ctx, "normal-1", map[string]string{"kubernetes.io/hostname": "normal-1"})

	// The ordered pod's main runs when the controller first sees it.
	ordered := podtest.Pod("ordered").UID("").Node("normal-1").Annotate(decision.AnnotationStopOrder, "a,b").
		Container("main", podtest.Running()).
		Container("a", podtest.Env(envCRR.Name, envCRR.Value), podtest.Running()).
		Container("b", podtest.Env(envCRR.Name, envCRR.Value), podtest.Running()).Build()
	ordered.TypeMeta = metav1.TypeMeta{}
	ordered = e.createPod(t, ctx, ordered)
	plain := e.createPod(t, ctx, jobPod("plain", "normal-1", true, envCRR))
	waitCRR := func(name string) {
		waitUntil(t, ctx, "CRR "+name, func(ctx context.Context) (bool, error) {
			_, err := e.kruise.AppsV1alpha1().ContainerRecreateRequests("default").Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return err == nil, err
		})
	}
	// The plain pod's CRR: the controller runs and has synced both pods.
	waitCRR(decision.CRRName(plain, 1))
	// The kubelet reports a container of the ordered pod terminated.
	terminate := func(index int) {
		t.Helper()
		p, err := e.kube.CoreV1().Pods("default").Get(ctx, "ordered", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Status.ContainerStatuses[index].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0,
			StartedAt: metav1.NewTime(time.Now().Add(-time.Minute)), FinishedAt: metav1.NewTime(time.Now().Add(time.Second).Truncate(time.Second))}}
		if _, err := e.kube.CoreV1().Pods("default").UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	terminate(0) // the main exits
	st1, st2 := decision.StageCRRName(ordered, 1, 1), decision.StageCRRName(ordered, 2, 1)
	waitCRR(st1)
	terminate(1) // a stopped: stage 2 follows
	waitCRR(st2)

	var plainReads, orderedReads []string
	for _, name := range e.crrReads(t) {
		switch {
		case strings.HasPrefix(name, "plain-"):
			plainReads = append(plainReads, name)
		case strings.HasPrefix(name, "ordered-"):
			orderedReads = append(orderedReads, name)
		}
	}
	if len(plainReads) != 0 {
		t.Errorf("the controller read CRRs %v of a pod on the happy path, want none", plainReads)
	}
	if len(orderedReads) != 0 {
		t.Errorf("the controller read CRRs %v of a two-stage pod on the happy path, want none", orderedReads)
	}
	t.Logf("live CRR reads: plain pod %v, two-stage pod %v", plainReads, orderedReads)
}
