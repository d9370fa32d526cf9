package cluster

// OpenKruise's CRDs and webhook configurations, as its chart installs them,
// read from the kruise module in the module cache.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/sidecar-terminator/sidecar-terminator/controller/deploy"
)

// KruiseCRDFiles returns the CRD manifests shipped in the kruise module zip.
// They are read from the module cache at run time, not vendored here.
func KruiseCRDFiles(ctx context.Context) ([]string, error) {
	src, err := moduleDir(ctx, kruiseModule, KruiseVersion)
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(src, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in %s/config/crd/bases: %v", src, err)
	}
	return files, nil
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs creates the CRDs in files and waits until each is Established.
func (c *ControlPlane) InstallCRDs(ctx context.Context, files []string) error {
	dyn, err := dynamic.NewForConfig(c.RestConfig)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	var names []string
	for _, f := range files {
		objs, err := readYAMLObjects(f)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" {
				continue
			}
			if _, err := dyn.Resource(crdGVR).Create(ctx, o, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("create CRD %s from %s: %w", o.GetName(), f, err)
			}
			names = append(names, o.GetName())
		}
	}
	for _, n := range names {
		err := waitFor(ctx, "CRD "+n+" Established", 30*time.Second, nil, func(ctx context.Context) (bool, error) {
			u, err := dyn.Resource(crdGVR).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, ci := range conds {
				cm, _ := ci.(map[string]any)
				if cm["type"] == "Established" && cm["status"] == "True" {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func readYAMLObjects(path string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	objs, err := deploy.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return objs, nil
}

// installKruiseWebhookConfigs creates the two webhook configurations from
// the module's config/webhook, as kustomize would: the "kruise-" name
// prefix, and the selectors of patch_manifests.yaml (without them the
// delete-protection webhooks would intercept every namespace and CRD
// deletion). kruise-manager then fills in caBundle and, because
// WEBHOOK_HOST is set, a https://127.0.0.1:PORT URL.
func installKruiseWebhookConfigs(ctx context.Context, cs kubernetes.Interface, moduleDir string) error {
	base := filepath.Join(moduleDir, "config", "webhook")
	var mut, patchMut admissionv1.MutatingWebhookConfiguration
	var val, patchVal admissionv1.ValidatingWebhookConfiguration
	if err := decodeKinds(filepath.Join(base, "manifests.yaml"), &mut, &val); err != nil {
		return err
	}
	if err := decodeKinds(filepath.Join(base, "patch_manifests.yaml"), &patchMut, &patchVal); err != nil {
		return err
	}
	for i := range mut.Webhooks {
		for _, p := range patchMut.Webhooks {
			if p.Name == mut.Webhooks[i].Name {
				mut.Webhooks[i].NamespaceSelector, mut.Webhooks[i].ObjectSelector = p.NamespaceSelector, p.ObjectSelector
			}
		}
		setService(&mut.Webhooks[i].ClientConfig)
	}
	for i := range val.Webhooks {
		for _, p := range patchVal.Webhooks {
			if p.Name == val.Webhooks[i].Name {
				val.Webhooks[i].NamespaceSelector, val.Webhooks[i].ObjectSelector = p.NamespaceSelector, p.ObjectSelector
			}
		}
		setService(&val.Webhooks[i].ClientConfig)
	}
	mut.ObjectMeta = metav1.ObjectMeta{Name: "kruise-mutating-webhook-configuration"}
	val.ObjectMeta = metav1.ObjectMeta{Name: "kruise-validating-webhook-configuration"}
	if _, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, &mut, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %s: %w", mut.Name, err)
	}
	if _, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &val, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create %s: %w", val.Name, err)
	}
	return nil
}

func setService(cc *admissionv1.WebhookClientConfig) {
	if cc.Service != nil {
		cc.Service.Namespace, cc.Service.Name = KruiseNamespace, "kruise-webhook-service"
	}
}

// decodeKinds fills mut and val from the documents of a multi-doc YAML.
func decodeKinds(path string, mut *admissionv1.MutatingWebhookConfiguration, val *admissionv1.ValidatingWebhookConfiguration) error {
	objs, err := readYAMLObjects(path)
	if err != nil {
		return err
	}
	for _, o := range objs {
		data, err := yaml.Marshal(o.Object)
		if err != nil {
			return fmt.Errorf("re-encode %s: %w", path, err)
		}
		switch o.GetKind() {
		case "MutatingWebhookConfiguration":
			err = yaml.Unmarshal(data, mut)
		case "ValidatingWebhookConfiguration":
			err = yaml.Unmarshal(data, val)
		}
		if err != nil {
			return fmt.Errorf("decode %s in %s: %w", o.GetKind(), path, err)
		}
	}
	return nil
}

// RemoveKruiseWebhookConfigs deletes kruise's two webhook configurations,
// so that pod and CRR creates no longer wait on a kruise-manager that is
// about to stop (their failurePolicy is Fail).
func RemoveKruiseWebhookConfigs(ctx context.Context, cs kubernetes.Interface) error {
	if err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, "kruise-mutating-webhook-configuration", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete kruise's mutating webhook configuration: %w", err)
	}
	if err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, "kruise-validating-webhook-configuration", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete kruise's validating webhook configuration: %w", err)
	}
	return nil
}
