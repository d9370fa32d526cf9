package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/sidecar-terminator/sidecar-terminator/controller/native"
	"github.com/sidecar-terminator/sidecar-terminator/controller/webhook"
)

// NativeSidecarOptions configure the native-sidecar admission webhook, off
// unless --native-sidecars-bind-address is set.
type NativeSidecarOptions struct {
	BindAddress    string
	WebhookConfig  string
	Service        string
	CertDNSNames   []string
	CertSecret     string
	CertDir        string
	AllowAnnotated bool
	CertRefresh    time.Duration
}

func defaultNativeSidecarOptions() NativeSidecarOptions {
	return NativeSidecarOptions{BindAddress: "0", WebhookConfig: "sidecar-terminator", Service: "sidecar-terminator-webhook",
		CertSecret: "sidecar-terminator-webhook-tls", CertRefresh: time.Hour}
}

func (n *NativeSidecarOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&n.BindAddress, "native-sidecars-bind-address", n.BindAddress, "Address of the HTTPS admission webhook that converts marked sidecars of opted-in Job pods to native sidecars; 0 disables it.")
	fs.StringVar(&n.WebhookConfig, "native-sidecars-webhook-config", n.WebhookConfig, "MutatingWebhookConfiguration whose caBundle the controller writes (with a self-managed certificate).")
	fs.StringVar(&n.Service, "native-sidecars-service", n.Service, "Service in front of the webhook, in the controller's namespace: the certificate's names.")
	fs.StringSliceVar(&n.CertDNSNames, "native-sidecars-cert-dns-names", n.CertDNSNames, "Names the self-managed certificate is made for; empty: the Service's names (<service>.<namespace>.svc and .svc.cluster.local).")
	fs.StringVar(&n.CertSecret, "native-sidecars-cert-secret", n.CertSecret, "Secret in the controller's namespace where the controller keeps the webhook's certificate.")
	fs.StringVar(&n.CertDir, "native-sidecars-cert-dir", n.CertDir, "Directory with tls.crt and tls.key kept by another tool (cert-manager), which then also writes the caBundle; empty: the controller manages the certificate.")
	fs.BoolVar(&n.AllowAnnotated, "native-sidecars-allow-annotated", n.AllowAnnotated, "Also convert sidecars named only by the pod annotation sidecar-terminator.io/sidecars (containers an injector adds).")
	fs.DurationVar(&n.CertRefresh, "native-sidecars-cert-refresh", n.CertRefresh, "How often the certificate is checked (renewed before expiry) or reloaded from --native-sidecars-cert-dir.")
}

// startNativeSidecars starts the webhook when enabled: its node cache, its
// certificate and its HTTPS server. Nothing in it stops the controller: a
// webhook that cannot serve leaves pods unchanged (failurePolicy Ignore) and
// the kill path handles them.
func startNativeSidecars(ctx context.Context, o *Options, client kubernetes.Interface, reg prometheus.Registerer, errs chan<- error) error {
	n := o.NativeSidecars
	if n.BindAddress == "0" || n.BindAddress == "" {
		return nil
	}
	logger := klog.FromContext(ctx)
	virtual, err := labels.Parse(o.VirtualNodeSelector)
	if err != nil {
		return fmt.Errorf("--virtual-node-selector %q: %w", o.VirtualNodeSelector, err)
	}
	v, err := client.Discovery().ServerVersion()
	if err != nil {
		return fmt.Errorf("native sidecars: read the API server's version: %w", err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(trimNode))
	nodes := factory.Core().V1().Nodes()
	lister, synced := nodes.Lister(), nodes.Informer().HasSynced
	factory.Start(ctx.Done())
	h := &webhook.Handler{
		Nodes: func() ([]*corev1.Node, error) {
			if !synced() {
				return nil, errors.New("the node cache has not synced yet")
			}
			return lister.List(labels.Everything())
		},
		Config:     native.Config{VirtualNodes: virtual, AllowAnnotated: n.AllowAnnotated, ServerVersion: v.GitVersion},
		Admissions: webhook.NewAdmissionsCounter(reg),
	}
	var src webhook.Source = &webhook.Files{Dir: n.CertDir}
	if n.CertDir == "" {
		ns := o.leaseNamespace()
		names := n.CertDNSNames
		if len(names) == 0 {
			names = []string{n.Service + "." + ns + ".svc", n.Service + "." + ns + ".svc.cluster.local"}
		}
		src = &webhook.Keeper{Client: client, Namespace: ns, Secret: n.CertSecret, WebhookConfig: n.WebhookConfig, DNSNames: names, Now: time.Now}
	}
	if err := src.Refresh(ctx); err != nil {
		logger.Error(err, "Webhook certificate not loaded yet; retried every period, pods are admitted unchanged until then")
	}
	go webhook.KeepRefreshed(ctx, src, n.CertRefresh)

	ln, err := net.Listen("tcp", n.BindAddress)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", n.BindAddress, err)
	}
	mux := http.NewServeMux()
	mux.Handle(webhook.Path, h)
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		TLSConfig:         &tls.Config{GetCertificate: src.GetCertificate, MinVersion: tls.VersionTLS12},
	}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs <- fmt.Errorf("serve the native-sidecar webhook on %s: %w", n.BindAddress, err)
		}
	}()
	logger.Info("Serving the native-sidecar webhook", "address", ln.Addr().String(), "path", webhook.Path, "apiServer", v.GitVersion, "selfManagedCertificate", n.CertDir == "")
	return nil
}

// trimNode keeps what the conversion reads of a node: its name, labels,
// taints and kubelet version.
func trimNode(obj any) (any, error) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{}
	out.Name, out.Labels, out.ResourceVersion = node.Name, node.Labels, node.ResourceVersion
	out.Spec.Taints = node.Spec.Taints
	out.Status.NodeInfo.KubeletVersion = node.Status.NodeInfo.KubeletVersion
	return out, nil
}

var _ cache.TransformFunc = trimNode

// writeNativeSidecars says, in explain, what the native-sidecar webhook did
// to the pod at admission (its annotation), or what it would decide for a
// pod like this one created now, and whether the pod is opted in.
func writeNativeSidecars(ctx context.Context, w io.Writer, client kubernetes.Interface, virtual labels.Selector, pod *corev1.Pod) {
	fmt.Fprintln(w, "\nNative sidecars (admission webhook):")
	if v := pod.Annotations[native.AnnotationConverted]; v != "" {
		fmt.Fprintf(w, "  converted at admission: %s\n", v)
		return
	}
	optIn := pod.Labels[native.LabelOptIn] == native.LabelOptInValue
	if ns, err := client.CoreV1().Namespaces().Get(ctx, pod.Namespace, metav1.GetOptions{}); err == nil {
		optIn = optIn || ns.Labels[native.LabelOptIn] == native.LabelOptInValue
	}
	if !optIn {
		fmt.Fprintf(w, "  not opted in (label %s=%s on the pod or its namespace); for a pod like this one created now:\n", native.LabelOptIn, native.LabelOptInValue)
	} else {
		fmt.Fprintln(w, "  opted in but not converted; for a pod like this one created now:")
	}
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(w, "  cannot tell: list nodes: %v\n", err)
		return
	}
	v, err := client.Discovery().ServerVersion()
	if err != nil {
		fmt.Fprintf(w, "  cannot tell: the API server's version: %v\n", err)
		return
	}
	nodes := make([]*corev1.Node, len(list.Items))
	for i := range list.Items {
		nodes[i] = &list.Items[i]
	}
	// Judged as created: its nodeName is taken for the scheduler's choice.
	created := pod.DeepCopy()
	created.Spec.NodeName = ""
	_ = native.Decide(created, nodes, native.Config{VirtualNodes: virtual, ServerVersion: v.GitVersion}).Explain(w)
}
