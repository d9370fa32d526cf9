package virtual

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

// newNamespace creates a namespace for one feature and deletes it at the
// end (pods on the virtual nodes go at once; nothing waits for it).
func newNamespace(ctx context.Context, t *testing.T, name string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := suite.kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	// Pod creation needs the default ServiceAccount, which KCM creates.
	waitUntil(ctx, t, "ServiceAccount default in "+name, func(ctx context.Context) (bool, error) {
		_, err := suite.kube.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	t.Cleanup(func() {
		_ = suite.kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

func waitUntil(ctx context.Context, t *testing.T, what string, cond func(context.Context) (bool, error)) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// events returns "Type Reason" of the events on the pod.
func events(ctx context.Context, pod *corev1.Pod) ([]string, error) {
	list, err := suite.kube.CoreV1().Events(pod.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(pod.UID)).String()})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ev := range list.Items {
		out = append(out, ev.Type+" "+ev.Reason)
	}
	return out, nil
}

func waitForEvent(ctx context.Context, t *testing.T, pod *corev1.Pod, want string) {
	t.Helper()
	waitUntil(ctx, t, want+" event on "+pod.Name, func(ctx context.Context) (bool, error) {
		evs, err := events(ctx, pod)
		for _, ev := range evs {
			if ev == want {
				return true, nil
			}
		}
		return false, err
	})
}

// auditEntry is the part of an audit.k8s.io/v1 Event the suite reads.
type auditEntry struct {
	Stage     string                    `json:"stage"`
	Verb      string                    `json:"verb"`
	User      struct{ Username string } `json:"user"`
	ObjectRef struct {
		Resource, Subresource, Namespace, Name string
	} `json:"objectRef"`
	ResponseStatus struct{ Code int } `json:"responseStatus"`
}

// controllerWrites lists the mutating requests the controller's identity
// made in namespace ns, events aside, as "verb resource[/sub] name code".
func controllerWrites(t *testing.T, ns string) []string {
	t.Helper()
	f, err := os.Open(suite.audit)
	if err != nil {
		t.Fatalf("open audit log: %v", err)
	}
	defer f.Close()
	user := "system:serviceaccount:" + cluster.ControllerNamespace + ":" + cluster.ControllerName
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var a auditEntry
		if json.Unmarshal(sc.Bytes(), &a) != nil || a.Stage != "ResponseComplete" || a.User.Username != user || a.ObjectRef.Namespace != ns {
			continue
		}
		switch a.Verb {
		case "create", "update", "patch", "delete", "deletecollection":
		default:
			continue
		}
		if a.ObjectRef.Resource == "events" {
			continue
		}
		res := a.ObjectRef.Resource
		if a.ObjectRef.Subresource != "" {
			res += "/" + a.ObjectRef.Subresource
		}
		out = append(out, a.Verb+" "+res+" "+a.ObjectRef.Name+" "+strconv.Itoa(a.ResponseStatus.Code))
	}
	return out
}
