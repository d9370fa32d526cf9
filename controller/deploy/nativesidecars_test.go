package deploy

import (
	"reflect"
	"sort"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/sidecar-terminator/sidecar-terminator/controller/native"
	"github.com/sidecar-terminator/sidecar-terminator/controller/webhook"
)

func named(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return nil
}

func TestNativeSidecarsOffByDefault(t *testing.T) {
	objs := render(t)
	if n := count(objs, "MutatingWebhookConfiguration"); n != 0 {
		t.Errorf("%d MutatingWebhookConfigurations rendered by default", n)
	}
	o, _ := controllerFlags(t, typed[appsv1.Deployment](t, only(t, objs, "Deployment")))
	if o.NativeSidecars.BindAddress != "0" {
		t.Errorf("the webhook serves by default on %q", o.NativeSidecars.BindAddress)
	}
}

// Enabled, the chart's objects fit together: the configuration calls the
// Service, which reaches the port the binary serves on; the binary writes
// the caBundle of that configuration and keeps its certificate for that
// Service's names in the Secret the Role names; and every webhook admits
// pods unchanged when it fails.
func TestNativeSidecarsWebhookFitsTogether(t *testing.T) {
	objs := render(t, "--set", "nativeSidecars.enabled=true", "--set", "nativeSidecars.port=9555", "--set", "nativeSidecars.allowAnnotated=true")
	dep := typed[appsv1.Deployment](t, only(t, objs, "Deployment"))
	o, _ := controllerFlags(t, dep)
	n := o.NativeSidecars
	if n.BindAddress != ":9555" || !n.AllowAnnotated || n.CertDir != "" {
		t.Errorf("webhook flags %+v", n)
	}
	mwc := typed[admissionregistrationv1.MutatingWebhookConfiguration](t, only(t, objs, "MutatingWebhookConfiguration"))
	if mwc.Name != n.WebhookConfig {
		t.Errorf("the binary patches %q, the chart installs %q", n.WebhookConfig, mwc.Name)
	}
	svc := typed[corev1.Service](t, named(t, objs, "Service", n.Service))
	if !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(dep.Spec.Template.Labels)) {
		t.Errorf("webhook Service selects %v, not the controller's pods", svc.Spec.Selector)
	}
	var port int32
	for _, p := range dep.Spec.Template.Spec.Containers[0].Ports {
		if p.Name == svc.Spec.Ports[0].TargetPort.StrVal {
			port = p.ContainerPort
		}
	}
	if port != 9555 {
		t.Errorf("the Service reaches container port %d, the binary serves on %s", port, n.BindAddress)
	}
	if len(mwc.Webhooks) != 2 {
		t.Fatalf("%d webhooks, want the namespace one and the pod one", len(mwc.Webhooks))
	}
	optIn := labels.Set{native.LabelOptIn: native.LabelOptInValue}
	for _, w := range mwc.Webhooks {
		if w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Ignore {
			t.Errorf("%s: failurePolicy %v, want Ignore", w.Name, w.FailurePolicy)
		}
		if w.ReinvocationPolicy == nil || *w.ReinvocationPolicy != admissionregistrationv1.IfNeededReinvocationPolicy {
			t.Errorf("%s: reinvocationPolicy %v, want IfNeeded", w.Name, w.ReinvocationPolicy)
		}
		if w.SideEffects == nil || *w.SideEffects != admissionregistrationv1.SideEffectClassNone {
			t.Errorf("%s: sideEffects %v", w.Name, w.SideEffects)
		}
		r := w.Rules
		if len(r) != 1 || !reflect.DeepEqual(r[0].Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Create}) ||
			!reflect.DeepEqual(r[0].Resources, []string{"pods"}) || !reflect.DeepEqual(r[0].APIGroups, []string{""}) {
			t.Errorf("%s: rules %+v, want pod CREATE only", w.Name, r)
		}
		s := w.ClientConfig.Service
		if s == nil || s.Name != svc.Name || s.Namespace != "st-test" || s.Path == nil || *s.Path != webhook.Path || s.Port == nil || *s.Port != svc.Spec.Ports[0].Port {
			t.Errorf("%s: clientConfig %+v does not call the webhook Service at %s", w.Name, s, webhook.Path)
		}
	}
	// Who is sent: an opted-in namespace's pods, or opted-in pods, never both
	// twice and never anything else.
	sent := func(nsLabels, podLabels labels.Set) int {
		calls := 0
		for _, w := range mwc.Webhooks {
			ns, _ := metav1LabelSelector(t, w.NamespaceSelector)
			obj, _ := metav1LabelSelector(t, w.ObjectSelector)
			if ns.Matches(nsLabels) && obj.Matches(podLabels) {
				calls++
			}
		}
		return calls
	}
	for name, c := range map[string]struct {
		ns, pod labels.Set
		want    int
	}{
		"neither":                    {nil, nil, 0},
		"opted-in namespace":         {optIn, nil, 1},
		"opted-in pod":               {nil, optIn, 1},
		"both":                       {optIn, optIn, 1},
		"a pod opting out":           {optIn, labels.Set{native.LabelOptIn: "disabled"}, 0},
		"another value is no opt-in": {labels.Set{native.LabelOptIn: "true"}, nil, 0},
	} {
		if got := sent(c.ns, c.pod); got != c.want {
			t.Errorf("%s: sent to %d webhooks, want %d", name, got, c.want)
		}
	}

	// RBAC: exactly webhook.Permissions, by name where they say so.
	var got []string
	for _, kind := range []string{"ClusterRole", "Role"} {
		for _, obj := range objs {
			if obj.GetKind() != kind || obj.GetName() != mwc.Name+"-webhook" {
				continue
			}
			var rules []rbacv1.PolicyRule
			if kind == "Role" {
				rules = typed[rbacv1.Role](t, obj).Rules
			} else {
				rules = typed[rbacv1.ClusterRole](t, obj).Rules
			}
			for _, r := range rules {
				for _, v := range r.Verbs {
					got = append(got, permissionKey(r.APIGroups[0], r.Resources[0], v, kind == "Role", r.ResourceNames))
				}
			}
		}
	}
	var want []string
	for _, p := range webhook.Permissions {
		for _, v := range p.Verbs {
			var names []string
			if p.Named {
				names = []string{map[string]string{"secrets": n.CertSecret, "mutatingwebhookconfigurations": n.WebhookConfig}[p.Resource]}
			}
			want = append(want, permissionKey(p.Group, p.Resource, v, p.Namespaced, names))
		}
	}
	sort.Strings(got)
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("the chart grants the webhook\n %v\nit needs\n %v", got, want)
	}

	np := typed[networkingv1.NetworkPolicy](t, only(t, objs, "NetworkPolicy"))
	open := false
	for _, in := range np.Spec.Ingress {
		for _, p := range in.Ports {
			if p.Port != nil && p.Port.StrVal == "webhook" && len(in.From) == 0 {
				open = true
			}
		}
	}
	if !open {
		t.Error("the NetworkPolicy keeps the API server from the webhook port")
	}
}

func permissionKey(group, resource, verb string, namespaced bool, names []string) string {
	scope := "cluster"
	if namespaced {
		scope = "namespace"
	}
	return group + "/" + resource + ":" + verb + "@" + scope + "/" + strings.Join(names, ",")
}

// metav1LabelSelector reads a webhook's selector; none selects everything.
func metav1LabelSelector(t *testing.T, s *metav1.LabelSelector) (labels.Selector, error) {
	t.Helper()
	if s == nil {
		return labels.Everything(), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		t.Fatalf("selector %+v: %v", s, err)
	}
	return sel, nil
}

func TestNativeSidecarsWithCertManager(t *testing.T) {
	objs := render(t, "--set", "nativeSidecars.enabled=true", "--set", "nativeSidecars.certManager.enabled=true")
	dep := typed[appsv1.Deployment](t, only(t, objs, "Deployment"))
	o, _ := controllerFlags(t, dep)
	if o.NativeSidecars.CertDir == "" {
		t.Fatal("the binary manages the certificate although cert-manager does")
	}
	cert := named(t, objs, "Certificate", o.NativeSidecars.Service)
	secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
	dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
	if want := o.NativeSidecars.Service + ".st-test.svc"; len(dnsNames) == 0 || dnsNames[0] != want {
		t.Errorf("Certificate names %v, want %s first", dnsNames, want)
	}
	mounted := false
	pod := dep.Spec.Template.Spec
	for _, v := range pod.Volumes {
		if v.Secret != nil && v.Secret.SecretName == secretName {
			for _, m := range pod.Containers[0].VolumeMounts {
				mounted = mounted || (m.Name == v.Name && m.MountPath == o.NativeSidecars.CertDir && m.ReadOnly)
			}
		}
	}
	if !mounted {
		t.Errorf("the Certificate's Secret %s is not mounted read-only at %s", secretName, o.NativeSidecars.CertDir)
	}
	mwc := only(t, objs, "MutatingWebhookConfiguration")
	if got := mwc.GetAnnotations()["cert-manager.io/inject-ca-from"]; got != "st-test/"+cert.GetName() {
		t.Errorf("inject-ca-from = %q", got)
	}
	if count(objs, "Issuer") != 1 {
		t.Error("no self-signed Issuer without an issuerRef")
	}
	for _, obj := range objs {
		if (obj.GetKind() == "Role" || obj.GetKind() == "ClusterRole") && obj.GetName() == mwc.GetName()+"-webhook" {
			t.Errorf("%s %s granted although cert-manager keeps the certificate", obj.GetKind(), obj.GetName())
		}
	}
	objs = render(t, "--set", "nativeSidecars.enabled=true", "--set", "nativeSidecars.certManager.enabled=true",
		"--set", "nativeSidecars.certManager.issuerRef.name=corp-ca", "--set", "nativeSidecars.certManager.issuerRef.kind=ClusterIssuer")
	if count(objs, "Issuer") != 0 {
		t.Error("an Issuer rendered although issuerRef names one")
	}
	cert = only(t, objs, "Certificate")
	if kind, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "kind"); kind != "ClusterIssuer" {
		t.Errorf("issuerRef kind %q", kind)
	}
}
