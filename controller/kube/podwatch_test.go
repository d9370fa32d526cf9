package kube

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/randfill"

	"github.com/sidecar-terminator/sidecar-terminator/controller/decision"
)

// filledPods are pods with every field set (randfill), and with something
// in each place TrimPod keeps from: our marks on the first container, a
// Job owner, our condition, a container stopped to restart the pod.
func filledPods(t testing.TB, n int) []corev1.Pod {
	t.Helper()
	f := randfill.NewWithSeed(41).NilChance(0).NumElements(1, 2).Funcs(
		func(x *intstr.IntOrString, c randfill.Continue) { *x = intstr.FromInt32(c.Int31()) },
		func(x *resource.Quantity, c randfill.Continue) {
			*x = *resource.NewQuantity(c.Int63n(1<<20), resource.DecimalSI)
		},
		func(x *metav1.Time, c randfill.Continue) { *x = metav1.NewTime(time.Unix(c.Int63n(1<<32), 0)) },
		func(x *metav1.FieldsV1, c randfill.Continue) { x.Raw = []byte(`{"f:spec":{"f:containers":{}}}`) },
	)
	yes := true
	out := make([]corev1.Pod, n)
	for i := range out {
		p := &out[i]
		f.Fill(p)
		p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
		p.Annotations[decision.AnnotationSidecars] = "sidecar"
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{APIVersion: "batch/v1", Kind: "Job", Name: "job", UID: "job-uid", Controller: &yes})
		p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: decision.EnvTerminate, Value: "true"})
		p.Spec.InitContainers[0].Env = append(p.Spec.InitContainers[0].Env, corev1.EnvVar{Name: decision.EnvTerminate, Value: "true"})
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: decision.ConditionSidecarTerminated,
			Status: corev1.ConditionTrue, Message: decision.KruiseSettleMessage, LastTransitionTime: metav1.NewTime(time.Unix(1_800_000_000, 0))})
		p.Status.ContainerStatuses[0].State.Terminated.Reason = decision.RestartingAllContainersReason
		if len(p.ManagedFields) == 0 || len(p.Spec.Volumes) == 0 {
			t.Fatal("randfill left managedFields or volumes empty")
		}
	}
	return out
}

// protoWatchFrames is a protobuf watch stream, each event as the API
// server frames it.
func protoWatchFrames(t testing.TB, events []watch.Event) []byte {
	t.Helper()
	objects := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	var b bytes.Buffer
	frames := protobuf.LengthDelimitedFramer.NewFrameWriter(&b)
	for _, e := range events {
		var obj bytes.Buffer
		if err := objects.Encode(e.Object, &obj); err != nil {
			t.Fatal(err)
		}
		frame, err := (&metav1.WatchEvent{Type: string(e.Type), Object: runtime.RawExtension{Raw: obj.Bytes()}}).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := frames.Write(frame); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// bothKubeClients are a clientset as client-go makes it, and the same
// with WithPodWatchDecoder.
func bothKubeClients(t testing.TB, cfg *rest.Config) (standard, ours kubernetes.Interface) {
	t.Helper()
	standard, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ours, err = WithPodWatchDecoder(standard, cfg); err != nil {
		t.Fatal(err)
	}
	return standard, ours
}

func collectPods(t testing.TB, kube kubernetes.Interface) []watch.Event {
	t.Helper()
	w, err := kube.CoreV1().Pods("").Watch(context.Background(), metav1.ListOptions{})
	return drain(t, w, err)
}

// cached is what the pod cache holds of a pod (CachePod).
func cached(t testing.TB, obj runtime.Object) any {
	t.Helper()
	c, err := CachePod(obj.(*corev1.Pod).DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The pod watch's own decoding (WithPodWatchDecoder) gives the pod cache
// exactly what client-go's decoding of the same stream gives it, for pods
// with every field set; and every other event whole: a bookmark's
// annotations (a watch list's end), an ERROR event's Status, an object of
// another kind.
func TestThePodWatchDecodesWhatTheCacheKeepsAsClientGoDoes(t *testing.T) {
	pods := filledPods(t, 4)
	bookmark := &corev1.Pod{TypeMeta: pods[0].TypeMeta, ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1234",
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
	node := &corev1.Node{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{"type": "virtual-kubelet"}}}
	gone := &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure,
		Code: http.StatusGone, Reason: metav1.StatusReasonExpired, Message: "too old resource version: 1 (1234)"}
	events := []watch.Event{
		{Type: watch.Added, Object: &pods[0]}, {Type: watch.Modified, Object: &pods[1]},
		{Type: watch.Bookmark, Object: bookmark}, {Type: watch.Deleted, Object: &pods[2]},
		{Type: watch.Modified, Object: node}, {Type: watch.Modified, Object: &pods[3]},
		{Type: watch.Error, Object: gone},
	}
	standard, ours := bothKubeClients(t, serveIn(t, runtime.ContentTypeProtobuf, protoWatchFrames(t, events), nil))
	want, got := collectPods(t, standard), collectPods(t, ours)
	if len(want) != len(events) || len(got) != len(events) {
		t.Fatalf("client-go decoded %d events, ours %d; %d were sent", len(want), len(got), len(events))
	}
	for i := range want {
		if want[i].Type != got[i].Type {
			t.Errorf("event %d: client-go's type %s, ours %s", i, want[i].Type, got[i].Type)
		}
		pod, isPod := want[i].Object.(*corev1.Pod)
		if !isPod || pod.ResourceVersion == "1234" {
			if !reflect.DeepEqual(want[i], got[i]) {
				t.Errorf("event %d (%s):\n client-go %#v\n ours      %#v", i, events[i].Type, want[i].Object, got[i].Object)
			}
			continue
		}
		if w, g := cached(t, want[i].Object), cached(t, got[i].Object); !reflect.DeepEqual(w, g) {
			t.Errorf("event %d (%s): the cache keeps of client-go's decoding\n %#v\n of ours\n %#v", i, events[i].Type, w, g)
		}
		if g := got[i].Object.(*corev1.Pod); len(pod.ManagedFields) == 0 || len(g.ManagedFields) != 0 || len(g.Spec.Volumes) != 0 {
			t.Errorf("event %d: client-go decoded %d managedFields, ours %d and %d volumes; ours should keep none",
				i, len(pod.ManagedFields), len(g.ManagedFields), len(g.Spec.Volumes))
		}
	}
}

// Each field the pod watch keeps is one the cache keeps something of:
// with any one of them dropped, what the cache keeps of some filled pod
// differs from client-go's decoding. So the comparison above fails when a
// field TrimPod reads is not kept, and the watch keeps no more than it
// needs.
func TestEachFieldThePodWatchKeepsIsOneTheCacheNeeds(t *testing.T) {
	pods := filledPods(t, 4)
	objects := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	full := scheme.Codecs.UniversalDeserializer()
	encoded := make([][]byte, len(pods))
	for i := range pods {
		var b bytes.Buffer
		if err := objects.Encode(&pods[i], &b); err != nil {
			t.Fatal(err)
		}
		encoded[i] = b.Bytes()
	}
	decodeAll := func(fields protoFields) []any {
		var out []any
		for _, data := range encoded {
			obj, _, err := podDecoder{full: full, fields: fields}.Decode(data, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, cached(t, obj))
		}
		return out
	}
	var want []any
	for _, data := range encoded {
		obj, _, err := full.Decode(data, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, cached(t, obj))
	}
	if !reflect.DeepEqual(decodeAll(keptPodFields), want) {
		t.Fatal("with every kept field, what the cache keeps differs from client-go's decoding")
	}
	for _, path := range fieldPaths(keptPodFields, nil) {
		if reflect.DeepEqual(decodeAll(without(keptPodFields, path)), want) {
			t.Errorf("with field %v dropped, the cache keeps the same of every pod: the field is not needed, or the pods do not show it", path)
		}
	}
}

// fieldPaths are the paths to every field f names, nested ones too.
func fieldPaths(f protoFields, at []protowire.Number) [][]protowire.Number {
	var out [][]protowire.Number
	nums := make([]protowire.Number, 0, len(f))
	for n := range f {
		nums = append(nums, n)
	}
	sort.Slice(nums, func(i, j int) bool { return nums[i] < nums[j] })
	for _, n := range nums {
		path := append(append([]protowire.Number(nil), at...), n)
		out = append(out, path)
		out = append(out, fieldPaths(f[n], path)...)
	}
	return out
}

// without is f with the field at path dropped; f is not changed.
func without(f protoFields, path []protowire.Number) protoFields {
	out := protoFields{}
	for n, sub := range f {
		out[n] = sub
	}
	if len(path) == 1 {
		delete(out, path[0])
		return out
	}
	out[path[0]] = without(f[path[0]], path[1:])
	return out
}

// Only the watch is decoded apart: a list through the same client keeps
// every field, managedFields included, as client-go decodes it.
func TestThePodClientDecodesAllButWatchesAsClientGoDoes(t *testing.T) {
	list := corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Items: filledPods(t, 2)}
	var body bytes.Buffer
	if err := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme).Encode(&list, &body); err != nil {
		t.Fatal(err)
	}
	standard, ours := bothKubeClients(t, serveIn(t, runtime.ContentTypeProtobuf, nil, body.Bytes()))
	want, err := standard.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ours.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Items) != 2 || len(got.Items[0].ManagedFields) == 0 || !reflect.DeepEqual(want, got) {
		t.Fatalf("a list through our client differs from client-go's:\n client-go %#v\n ours      %#v", want, got)
	}
}

// A clientset that is not a REST client's (a unit test's fake) is kept as
// it is.
func TestAFakeKubeClientIsKeptAsItIs(t *testing.T) {
	f := fake.NewClientset()
	got, err := WithPodWatchDecoder(f, &rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil || got != kubernetes.Interface(f) {
		t.Fatalf("got %T, %v; want the fake itself", got, err)
	}
}

func BenchmarkPodWatchDecode(b *testing.B) {
	events := make([]watch.Event, 200)
	for i := range events {
		events[i] = watch.Event{Type: watch.Modified, Object: servedPod(i)}
	}
	stream := protoWatchFrames(b, events)
	for _, side := range []string{"client-go", "ours"} {
		b.Run(side, func(b *testing.B) {
			kube, ours := bothKubeClients(b, serveIn(b, runtime.ContentTypeProtobuf, stream, nil))
			if side == "ours" {
				kube = ours
			}
			b.ReportAllocs()
			for b.Loop() {
				if n := len(collectPods(b, kube)); n != len(events) {
					b.Fatalf("%d events", n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(events)), "ns/event")
		})
	}
}

// servedPod is a Job's pod of one main and one marked sidecar as a watch
// sends it once its main has exited: what the Job controller, the
// scheduler, the kubelet and the API server write (the service account's
// projected volume, the default tolerations, four managedFields entries).
func servedPod(i int) *corev1.Pod {
	at := metav1.NewTime(time.Unix(1_800_000_000, 0))
	yes, grace, expiry, mode := true, int64(30), int64(3607), int32(420)
	fields := &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:batch.kubernetes.io/controller-uid":{},"f:batch.kubernetes.io/job-name":{},"f:controller-uid":{},"f:job-name":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"5c1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"main\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}},"k:{\"name\":\"sidecar\"}":{".":{},"f:env":{".":{},"k:{\"name\":\"KRUISE_TERMINATE_SIDECAR_WHEN_JOB_EXIT\"}":{".":{},"f:name":{},"f:value":{}}},"f:image":{},"f:name":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}`)}
	managed := []metav1.ManagedFieldsEntry{
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &at, FieldsType: "FieldsV1", FieldsV1: fields},
		{Manager: "kube-scheduler", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &at, FieldsType: "FieldsV1", FieldsV1: fields, Subresource: "status"},
		{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &at, FieldsType: "FieldsV1", FieldsV1: fields, Subresource: "status"},
		{Manager: "sidecar-terminator", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &at, FieldsType: "FieldsV1", FieldsV1: fields},
	}
	name := fmt.Sprintf("job-%d-abcde", i)
	container := func(name string, env []corev1.EnvVar) corev1.Container {
		return corev1.Container{Name: name, Image: "registry.example/" + name + ":1.0", Env: env, ImagePullPolicy: corev1.PullIfNotPresent,
			TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access-x7k2p", ReadOnly: true, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}}}
	}
	status := func(name string, terminated bool) corev1.ContainerStatus {
		s := corev1.ContainerStatus{Name: name, Image: "registry.example/" + name + ":1.0", ImageID: "registry.example/" + name + "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
			ContainerID: "containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Started: &yes, Ready: !terminated}
		if terminated {
			s.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: at, FinishedAt: at, ContainerID: s.ContainerID}
		} else {
			s.State.Running = &corev1.ContainerStateRunning{StartedAt: at}
		}
		return s
	}
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, GenerateName: "job-1234-", Namespace: "default", UID: "6f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b",
			ResourceVersion: "123456789", CreationTimestamp: at,
			Labels: map[string]string{"batch.kubernetes.io/controller-uid": "5c1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b", "batch.kubernetes.io/job-name": "job-1234",
				"controller-uid": "5c1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b", "job-name": "job-1234"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "job-1234", UID: "5c1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b", Controller: &yes, BlockOwnerDeletion: &yes}},
			Finalizers:      []string{"batch.kubernetes.io/job-tracking"},
			ManagedFields:   managed,
		},
		Spec: corev1.PodSpec{
			Volumes: []corev1.Volume{{Name: "kube-api-access-x7k2p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: &mode, Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: &expiry, Path: "token"}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
			}}}}},
			Containers:                    []corev1.Container{container("main", nil), container("sidecar", []corev1.EnvVar{{Name: decision.EnvTerminate, Value: "true"}})},
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace, DNSPolicy: corev1.DNSClusterFirst, ServiceAccountName: "default", NodeName: "node-17",
			SecurityContext: &corev1.PodSecurityContext{}, SchedulerName: "default-scheduler",
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &[]int64{300}[0]},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &[]int64{300}[0]},
			},
			EnableServiceLinks: &yes,
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "10.0.0.17", HostIPs: []corev1.HostIP{{IP: "10.0.0.17"}},
			PodIP: "10.244.17.5", PodIPs: []corev1.PodIP{{IP: "10.244.17.5"}}, StartTime: &at, QOSClass: corev1.PodQOSBestEffort,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: at},
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: at},
				{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: at, Reason: "ContainersNotReady", Message: "containers with unready status: [main]"},
				{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, LastTransitionTime: at, Reason: "ContainersNotReady", Message: "containers with unready status: [main]"},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at},
			},
			ContainerStatuses: []corev1.ContainerStatus{status("main", true), status("sidecar", false)},
		},
	}
}
