// Command wait-nodes waits until the named Nodes exist and report Ready, for
// scripts that must not assume kubectl (kind/install.sh):
//
//	go run ./hack/cmd/wait-nodes --kubeconfig PATH --timeout 5m NODE...
//	helm get values mock-node --all -o json | go run ./hack/cmd/wait-nodes --values-json -
//
// With --values-json the nodes are the "nodes" list of a chart's values
// (kind/mock-node's), read from the file or stdin. With --server-version
// MAJOR.MINOR it first checks that the API server runs that version: a kind
// cluster kept from an earlier run may run another.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	timeout := flag.Duration("timeout", 5*time.Minute, "how long to wait")
	serverVersion := flag.String("server-version", "", "MAJOR.MINOR the API server must report")
	valuesJSON := flag.String("values-json", "", `chart values as JSON ("-" for stdin) whose "nodes" list names the nodes`)
	flag.Parse()
	nodes := flag.Args()
	if *valuesJSON != "" {
		from, err := valuesNodes(*valuesJSON)
		if err != nil {
			fmt.Fprintf(os.Stderr, "wait-nodes: %v\n", err)
			os.Exit(1)
		}
		nodes = append(nodes, from...)
	}
	if err := run(*kubeconfig, *timeout, *serverVersion, nodes); err != nil {
		fmt.Fprintf(os.Stderr, "wait-nodes: %v\n", err)
		os.Exit(1)
	}
}

func valuesNodes(path string) ([]string, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("read values: %w", err)
	}
	var v struct {
		Nodes []string `json:"nodes"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("parse values: %w", err)
	}
	return v.Nodes, nil
}

func run(kubeconfig string, timeout time.Duration, serverVersion string, nodes []string) error {
	if len(nodes) == 0 && serverVersion == "" {
		return errors.New("name at least one node, or a server version")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if serverVersion != "" {
		v, err := cs.Discovery().ServerVersion()
		if err != nil {
			return fmt.Errorf("server version: %w", err)
		}
		if got := v.Major + "." + strings.TrimSuffix(v.Minor, "+"); got != serverVersion {
			return fmt.Errorf("the API server runs Kubernetes %s (%s), want %s", got, v.GitVersion, serverVersion)
		}
		fmt.Printf("API server %s\n", v.GitVersion)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for _, name := range nodes {
		last := "not found"
		for !ready(ctx, cs, name, &last) {
			select {
			case <-ctx.Done():
				return fmt.Errorf("node %s not Ready after %s: %s", name, timeout, last)
			case <-time.After(time.Second):
			}
		}
		fmt.Printf("node %s Ready\n", name)
	}
	return nil
}

// ready reports whether the node's Ready condition is True; last keeps what
// was seen, for the error on timeout.
func ready(ctx context.Context, cs kubernetes.Interface, name string, last *string) bool {
	n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		*last = err.Error()
		return false
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			*last = fmt.Sprintf("Ready=%s (%s)", c.Status, c.Message)
			return c.Status == corev1.ConditionTrue
		}
	}
	*last = "no Ready condition"
	return false
}
