package kube

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

// The pod watch's events decoded in one pass each, keeping only what the
// pod cache keeps. The pod informer watches every Job-type pod of the
// cluster, and in a burst most of its events are answered by the cache's
// filters alone; yet client-go decodes each event whole, in protobuf:
// the event (runtime/serializer/protobuf's RawSerializer) copies the
// object's bytes, the object's envelope (runtime.Unknown) copies them
// again, and the pod's every field is then decoded: managedFields,
// volumes, probes, tolerations, all of which TrimPod drops at once. In
// e2e/bench's profile of a 20,000-pod burst the two copies were 383 MB of
// the controller's 1,590 MB allocated in a round, and the pod's decoding
// the largest piece of its CPU besides the writes.
//
// A watch on this client reads the event's fields in place (protowire),
// and decodes a pod from a copy of its bytes that holds only the fields
// keptPodFields names, with the generated Unmarshal: those TrimPod reads,
// and the metadata the informer reads (its key, resourceVersion, and a
// watch list's end annotation). Any other object (a Status in an ERROR
// event, another kind), and any bytes it cannot read, go to client-go's
// decoder, as do lists, gets and writes.
// TestThePodWatchDecodesWhatTheCacheKeepsAsClientGoDoes holds what the
// cache keeps of each pod equal to client-go's decoding, and
// TestEachFieldThePodWatchKeepsIsOneTheCacheNeeds holds that dropping any
// one kept field changes it.

// WithPodWatchDecoder is kube with its core/v1 client's protobuf watches
// decoded as above; cfg is the configuration kube was made from.
func WithPodWatchDecoder(kube kubernetes.Interface, cfg *rest.Config) (kubernetes.Interface, error) {
	rc, ok := kube.CoreV1().RESTClient().(*rest.RESTClient)
	if !ok || rc == nil {
		return kube, nil
	}
	gv := corev1.SchemeGroupVersion
	codecs := rest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion()
	negotiator := watchNegotiator{ClientNegotiator: runtime.NewClientNegotiator(codecs, gv),
		contentType: runtime.ContentTypeProtobuf,
		decoders: func(objects runtime.Decoder, events runtime.Serializer) (runtime.Decoder, runtime.Serializer) {
			return podDecoder{full: objects, fields: keptPodFields}, protoWatchEventDecoder{events}
		}}
	core, err := withNegotiator(rc, cfg, gv, "/api", negotiator)
	if err != nil {
		return nil, fmt.Errorf("core client: %w", err)
	}
	return podWatchClientset{Interface: kube, core: corev1client.New(core)}, nil
}

// podWatchClientset is a clientset whose core/v1 client decodes watches as
// WithPodWatchDecoder says.
type podWatchClientset struct {
	kubernetes.Interface
	core *corev1client.CoreV1Client
}

func (c podWatchClientset) CoreV1() corev1client.CoreV1Interface { return c.core }

// protoWatchEventDecoder decodes a protobuf watch event's frame into the
// metav1.WatchEvent it is asked for, with the object's bytes left in the
// frame: the stream's decoder reads the next frame into the same buffer
// only when asked for the next event, and client-go's watch decoder
// decodes the object before that (rest/watch.Decoder.Decode). Other
// requests, and frames it cannot read, go to client-go's serializer.
type protoWatchEventDecoder struct{ runtime.Serializer }

func (d protoWatchEventDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	e, ok := into.(*metav1.WatchEvent)
	if !ok {
		return d.Serializer.Decode(data, defaults, into)
	}
	// metav1.WatchEvent: type = 1, object = 2 (a runtime.RawExtension:
	// raw = 1).
	var kind, raw []byte
	okFields := eachField(data, func(num protowire.Number, typ protowire.Type, value []byte) bool {
		if typ != protowire.BytesType {
			return false
		}
		switch num {
		case 1:
			kind = value
		case 2:
			return eachField(value, func(num protowire.Number, typ protowire.Type, value []byte) bool {
				if num == 1 && typ == protowire.BytesType {
					raw = value
				}
				return typ == protowire.BytesType || num != 1
			})
		}
		return true
	})
	if !okFields || raw == nil {
		return d.Serializer.Decode(data, defaults, into)
	}
	*e = metav1.WatchEvent{Type: eventType(kind), Object: runtime.RawExtension{Raw: raw}}
	return e, &schema.GroupVersionKind{Version: "v1", Kind: "WatchEvent"}, nil
}

// eventType is the event's type, as a constant for the five a watch sends.
func eventType(b []byte) string {
	for _, t := range []watch.EventType{watch.Added, watch.Modified, watch.Deleted, watch.Bookmark, watch.Error} {
		if string(b) == string(t) {
			return string(t)
		}
	}
	return string(b)
}

// podDecoder decodes a watch event's object as a pod with only the fields
// it keeps (keptPodFields), when it is a pod; anything else, or a request
// for another type, goes to client-go's decoder.
type podDecoder struct {
	full   runtime.Decoder
	fields protoFields
}

// protobufPrefix starts every object in the API's protobuf encoding
// (runtime/serializer/protobuf: protoEncodingPrefix), before its
// runtime.Unknown envelope.
var protobufPrefix = []byte{'k', '8', 's', 0}

var podKind = corev1.SchemeGroupVersion.WithKind("Pod")

func (d podDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	pod, ok := into.(*corev1.Pod)
	if into != nil && !ok {
		return d.full.Decode(data, defaults, into)
	}
	raw, isPod := podBytes(data)
	if !isPod {
		return d.full.Decode(data, defaults, into)
	}
	buf := keptBuffers.Get().(*[]byte)
	defer putKeptBuffer(buf)
	kept, ok := d.fields.appendKept((*buf)[:0], raw)
	*buf = kept
	if !ok {
		return d.full.Decode(data, defaults, into)
	}
	if pod == nil {
		pod = new(corev1.Pod)
	}
	// No TypeMeta: client-go's decoder for a typed client clears it
	// (runtime.WithoutVersionDecoder). The generated Unmarshal copies every
	// string and byte out of kept, which is used again.
	*pod = corev1.Pod{}
	if err := pod.Unmarshal(kept); err != nil {
		return d.full.Decode(data, defaults, into)
	}
	gvk := podKind
	return pod, &gvk, nil
}

// podBytes are the pod's own bytes inside an object's encoding, when the
// object is a v1 Pod: the envelope is runtime.Unknown (typeMeta = 1, with
// apiVersion = 1 and kind = 2; raw = 2).
func podBytes(data []byte) ([]byte, bool) {
	if !bytes.HasPrefix(data, protobufPrefix) {
		return nil, false
	}
	var apiVersion, kind, raw []byte
	ok := eachField(data[len(protobufPrefix):], func(num protowire.Number, typ protowire.Type, value []byte) bool {
		if typ != protowire.BytesType {
			return num != 1 && num != 2
		}
		switch num {
		case 1:
			return eachField(value, func(num protowire.Number, typ protowire.Type, value []byte) bool {
				switch {
				case num == 1 && typ == protowire.BytesType:
					apiVersion = value
				case num == 2 && typ == protowire.BytesType:
					kind = value
				}
				return typ == protowire.BytesType || (num != 1 && num != 2)
			})
		case 2:
			raw = value
		}
		return true
	})
	return raw, ok && raw != nil && string(apiVersion) == podKind.Version && string(kind) == podKind.Kind
}

// eachField calls fn with each field of a protobuf message, a
// length-delimited field's value without its length; false when the bytes
// do not read as a message, or fn says so.
func eachField(msg []byte, fn func(num protowire.Number, typ protowire.Type, value []byte) bool) bool {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return false
		}
		m := protowire.ConsumeFieldValue(num, typ, msg[n:])
		if m < 0 {
			return false
		}
		value := msg[n : n+m]
		if typ == protowire.BytesType {
			value, _ = protowire.ConsumeBytes(value)
		}
		if !fn(num, typ, value) {
			return false
		}
		msg = msg[n+m:]
	}
	return true
}

// protoFields names the fields of a message to keep: a field not named is
// dropped, one named with nil is kept whole, and one named with its own
// protoFields is a message kept with only those of its fields.
type protoFields map[protowire.Number]protoFields

// The fields of a pod the watch keeps (k8s.io/api/core/v1/generated.proto,
// k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto): each one TrimPod
// reads, and all of the annotations (a watch list's end is told by one).
var (
	// Container: name, image, env, restartPolicy, restartPolicyRules; of
	// an init container, not its env.
	keptContainerFields     = protoFields{1: nil, 2: nil, 7: nil, 24: nil, 25: nil}
	keptInitContainerFields = protoFields{1: nil, 2: nil, 24: nil, 25: nil}
	// ContainerStatus: name, state, lastState, restartCount, image,
	// containerID.
	keptContainerStatusFields = protoFields{1: nil, 2: nil, 3: nil, 5: nil, 6: nil, 8: nil}
	keptPodFields             = protoFields{
		// ObjectMeta: name, generateName, namespace, uid, resourceVersion,
		// deletionTimestamp, annotations, ownerReferences.
		1: {1: nil, 2: nil, 3: nil, 5: nil, 6: nil, 9: nil, 12: nil, 13: nil},
		// PodSpec: containers, restartPolicy,
		// terminationGracePeriodSeconds, nodeName, initContainers.
		2: {2: keptContainerFields, 3: nil, 4: nil, 10: nil, 20: keptInitContainerFields},
		// PodStatus: phase, conditions, containerStatuses,
		// initContainerStatuses.
		3: {1: nil, 2: nil, 8: keptContainerStatusFields, 10: keptContainerStatusFields},
	}
)

// appendKept appends to dst the fields of msg that f keeps, in their
// order; false when msg does not read as a message.
func (f protoFields) appendKept(dst, msg []byte) ([]byte, bool) {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return dst, false
		}
		m := protowire.ConsumeFieldValue(num, typ, msg[n:])
		if m < 0 {
			return dst, false
		}
		sub, kept := f[num]
		switch {
		case !kept:
		case sub == nil || typ != protowire.BytesType:
			dst = append(dst, msg[:n+m]...)
		default:
			value, _ := protowire.ConsumeBytes(msg[n : n+m])
			dst = append(dst, msg[:n]...)
			// What is kept of the message is no longer than it: its length
			// is written in the room the whole length would take, then
			// the kept bytes are moved up to it if it takes less.
			room := protowire.SizeVarint(uint64(len(value)))
			at := len(dst)
			dst = append(dst, make([]byte, room)...)
			var ok bool
			if dst, ok = sub.appendKept(dst, value); !ok {
				return dst, false
			}
			size := len(dst) - at - room
			var length [binary.MaxVarintLen64]byte
			l := protowire.AppendVarint(length[:0], uint64(size))
			copy(dst[at+len(l):], dst[at+room:])
			copy(dst[at:], l)
			dst = dst[:at+len(l)+size]
		}
		msg = msg[n+m:]
	}
	return dst, true
}

// keptBuffers are the buffers a pod's kept bytes are copied into; one over
// maxKeptBuffer is not kept for the next.
var keptBuffers = sync.Pool{New: func() any { return new([]byte) }}

const maxKeptBuffer = 1 << 20

func putKeptBuffer(b *[]byte) {
	if cap(*b) <= maxKeptBuffer {
		keptBuffers.Put(b)
	}
}
