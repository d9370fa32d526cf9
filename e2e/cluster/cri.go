package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// removeAllSandboxes stops and removes every pod sandbox through CRI, as
// the kubelet would when pods are deleted: containers are stopped (SIGTERM,
// then SIGKILL after the grace period), CNI DEL removes each pod's veth and
// IP lease, the network namespace is unpinned, and the shims exit. Killing
// containerd alone would leave all of that behind.
func removeAllSandboxes(ctx context.Context, socket string) error {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial containerd CRI %s: %w", socket, err)
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("list pod sandboxes: %w", err)
	}
	// Stop containers with a short timeout first: a container that ignores
	// SIGTERM would otherwise hold teardown for its whole grace period.
	cl, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err == nil {
		for _, c := range cl.Containers {
			if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
				_, _ = rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: c.Id, Timeout: 2})
			}
		}
	}
	var errs []error
	for _, s := range list.Items {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stop sandbox %s (%s/%s): %w", s.Id, s.Metadata.GetNamespace(), s.Metadata.GetName(), err))
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox %s: %w", s.Id, err))
		}
	}
	return errors.Join(errs...)
}
