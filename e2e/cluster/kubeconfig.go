package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// UserKubeconfig writes a kubeconfig for user, in groups, with a client
// certificate of its own, so that an audit log tells its requests apart.
func (c *ControlPlane) UserKubeconfig(name, user string, groups []string) (string, error) {
	return c.componentKubeconfig(name, user, groups)
}

// credentials of one kubeconfig user: a client certificate or a bearer token.
type credentials struct {
	certFile, keyFile string
	token             string
}

// writeKubeconfig writes a self-contained kubeconfig (data embedded, so the
// file still works when copied elsewhere).
func writeKubeconfig(path, server, caFile string, c credentials) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("read CA for kubeconfig: %w", err)
	}
	user := &clientcmdapi.AuthInfo{Token: c.token}
	if c.certFile != "" {
		if user.ClientCertificateData, err = os.ReadFile(c.certFile); err != nil {
			return fmt.Errorf("read client cert: %w", err)
		}
		if user.ClientKeyData, err = os.ReadFile(c.keyFile); err != nil {
			return fmt.Errorf("read client key: %w", err)
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos["user"] = user
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "user"}
	cfg.CurrentContext = "local"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create kubeconfig dir: %w", err)
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// ServiceAccountKubeconfig writes a kubeconfig at <run>/kubeconfigs/<ns>-<name>
// that authenticates as the ServiceAccount ns/name, with a token from the
// TokenRequest API, and returns its path. The ServiceAccount must exist. Use
// it to run a component with exactly the RBAC it ships with.
func (c *ControlPlane) ServiceAccountKubeconfig(ctx context.Context, namespace, name string) (string, error) {
	cs, err := kubernetes.NewForConfig(c.RestConfig)
	if err != nil {
		return "", fmt.Errorf("client: %w", err)
	}
	expiry := int64(48 * 3600) // outlives any test or demo run
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("request token for serviceaccount %s/%s: %w", namespace, name, err)
	}
	path := filepath.Join(c.RunDir, "kubeconfigs", namespace+"-"+name)
	if err := writeKubeconfig(path, c.Server, c.PKI.CAFile(), credentials{token: tr.Status.Token}); err != nil {
		return "", err
	}
	return path, nil
}

// EnsureNamespace creates namespace ns if needed and, when
// kube-controller-manager does not run, what it would have created there:
// the `default` ServiceAccount (pod admission refuses pods without it) and
// the kube-root-ca.crt ConfigMap (projected token volumes wait for it).
func (c *ControlPlane) EnsureNamespace(ctx context.Context, ns string) error {
	cs, err := kubernetes.NewForConfig(c.RestConfig)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	if c.hasKCM {
		return nil
	}
	_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create serviceaccount %s/default: %w", ns, err)
	}
	ca, err := os.ReadFile(c.PKI.CAFile())
	if err != nil {
		return fmt.Errorf("read CA: %w", err)
	}
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "kube-root-ca.crt"},
		Data:       map[string]string{"ca.crt": string(ca)},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create configmap %s/kube-root-ca.crt: %w", ns, err)
	}
	return nil
}
