package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	kruiseclient "github.com/openkruise/kruise-api/client/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/sidecar-terminator/sidecar-terminator/e2e/cluster"
)

func clients(cfg *rest.Config) (kubernetes.Interface, kruiseclient.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 5000, 10000 // the benchmark must not be what throttles the burst
	kube, err := kubernetes.NewForConfig(c)
	if err != nil {
		return nil, nil, err
	}
	kruise, err := kruiseclient.NewForConfig(c)
	return kube, kruise, err
}

// prepare installs the CRR API and the controller's RBAC, creates the nodes,
// the background pods and the idle Job pods.
func prepare(ctx context.Context, cp *cluster.ControlPlane, kube kubernetes.Interface, cfg Config) error {
	files, err := cluster.KruiseCRDFiles(ctx)
	if err != nil {
		return err
	}
	var crr []string
	for _, f := range files {
		// kruise-manager wants every kruise CRD; the others only the CRR's.
		if cfg.Kruise || strings.Contains(filepath.Base(f), "containerrecreaterequests") {
			crr = append(crr, f)
		}
	}
	if err := cp.InstallCRDs(ctx, crr); err != nil {
		return err
	}
	if err := cp.ApplyControllerRBAC(ctx, cfg.Root); err != nil {
		return err
	}
	for name, labels := range benchNodes() {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		if _, err := kube.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create node %s: %w", name, err)
		}
	}
	start := time.Now()
	if err := parallel(cfg.BackgroundPods, 64, func(i int) error {
		_, err := kube.CoreV1().Pods(Namespace).Create(ctx, backgroundPod(i), metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("create background pods: %w", err)
	}
	cfg.Logf("%d background pods created in %s", cfg.BackgroundPods, time.Since(start).Round(time.Second))
	b := &burst{kube: kube, run: "idle"}
	return b.create(ctx, cfg.IdleJobPods, 1)
}

// benchNodes are the bench's Node objects and their labels: one normal
// node, two virtual ones labelled as OpenKruise knows a virtual kubelet.
// None has a Ready condition (see kruise.go).
func benchNodes() map[string]map[string]string {
	return map[string]map[string]string{
		NormalNode: nil, VirtualNodePrefix + "1": {"type": "virtual-kubelet"}, VirtualNodePrefix + "2": {"type": "virtual-kubelet"},
	}
}
