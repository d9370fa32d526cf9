package webhook

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
)

// Source serves the webhook's current certificate to its TLS listener.
type Source interface {
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// Refresh loads (and where it manages it, renews) the certificate.
	Refresh(ctx context.Context) error
}

// Keeper manages the certificate itself: a Secret holds it, so every
// replica serves the same pair; any replica renews it (the Secret's
// resourceVersion makes one win) and writes the CA into the webhook
// configuration's caBundle.
type Keeper struct {
	Client        kubernetes.Interface
	Namespace     string
	Secret        string
	WebhookConfig string // the MutatingWebhookConfiguration's name; "" writes no caBundle
	DNSNames      []string
	Now           func() time.Time

	current atomic.Pointer[tls.Certificate]
}

func (k *Keeper) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := k.current.Load(); c != nil {
		return c, nil
	}
	return nil, errNoPair
}

// Refresh renews the Secret's pair when it needs it, loads it, and makes
// the webhook configuration trust it.
func (k *Keeper) Refresh(ctx context.Context) error {
	var certs Certs
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		certs, err = k.renew(ctx)
		if apierrors.IsAlreadyExists(err) {
			// Another replica created it first: read theirs.
			return apierrors.NewConflict(corev1.Resource("secrets"), k.Secret, err)
		}
		return err
	})
	if err != nil {
		return err
	}
	pair, err := tls.X509KeyPair(certs.Cert, certs.Key)
	if err != nil {
		return fmt.Errorf("load the serving pair of secret %s/%s: %w", k.Namespace, k.Secret, err)
	}
	k.current.Store(&pair)
	if k.WebhookConfig == "" {
		return nil
	}
	return PatchCABundle(ctx, k.Client, k.WebhookConfig, certs.CABundle())
}

func (k *Keeper) renew(ctx context.Context) (Certs, error) {
	secrets := k.Client.CoreV1().Secrets(k.Namespace)
	s, err := secrets.Get(ctx, k.Secret, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return Certs{}, fmt.Errorf("read secret %s/%s: %w", k.Namespace, k.Secret, err)
	}
	found := err == nil
	var have Certs
	if found {
		have = Certs{CA: s.Data[KeyCA], Cert: s.Data[KeyCert], Key: s.Data[KeyKey], PreviousCA: s.Data[KeyPreviousCA]}
	}
	why := NeedsRenewal(have, k.DNSNames, k.Now())
	if why == "" {
		return have, nil
	}
	certs, err := Generate(k.DNSNames, k.Now(), have.CA)
	if err != nil {
		return Certs{}, err
	}
	data := map[string][]byte{KeyCA: certs.CA, KeyCert: certs.Cert, KeyKey: certs.Key}
	if len(certs.PreviousCA) > 0 {
		data[KeyPreviousCA] = certs.PreviousCA
	}
	if !found {
		_, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: k.Secret, Namespace: k.Namespace,
				Labels: map[string]string{"app.kubernetes.io/managed-by": "sidecar-terminator"}},
			Type: corev1.SecretTypeTLS, Data: data,
		}, metav1.CreateOptions{})
	} else {
		s = s.DeepCopy()
		s.Data = data
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{}) // resourceVersion: one replica wins
	}
	if err != nil {
		return Certs{}, fmt.Errorf("write secret %s/%s: %w", k.Namespace, k.Secret, err)
	}
	klog.FromContext(ctx).Info("Webhook certificate renewed", "secret", k.Namespace+"/"+k.Secret, "reason", why, "dnsNames", k.DNSNames)
	return certs, nil
}

// PatchCABundle makes every webhook of the configuration trust bundle.
func PatchCABundle(ctx context.Context, client kubernetes.Interface, name string, bundle []byte) error {
	configs := client.AdmissionregistrationV1().MutatingWebhookConfigurations()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cfg, err := configs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("read MutatingWebhookConfiguration %s: %w", name, err)
		}
		changed := false
		cfg = cfg.DeepCopy()
		for i := range cfg.Webhooks {
			if !SameCA(cfg.Webhooks[i].ClientConfig.CABundle, bundle) {
				cfg.Webhooks[i].ClientConfig.CABundle = bundle
				changed = true
			}
		}
		if !changed {
			return nil
		}
		if _, err := configs.Update(ctx, cfg, metav1.UpdateOptions{}); err != nil {
			return err
		}
		klog.FromContext(ctx).Info("Webhook caBundle written", "mutatingWebhookConfiguration", name)
		return nil
	})
}

// Files serves the pair another tool keeps in a directory (cert-manager's
// Secret mounted as tls.crt and tls.key); that tool also writes the caBundle
// (cert-manager's CA injector).
type Files struct {
	Dir     string
	current atomic.Pointer[tls.Certificate]
}

func (f *Files) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := f.current.Load(); c != nil {
		return c, nil
	}
	return nil, errNoPair
}

func (f *Files) Refresh(context.Context) error {
	cert, err := os.ReadFile(filepath.Join(f.Dir, KeyCert))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(filepath.Join(f.Dir, KeyKey))
	if err != nil {
		return err
	}
	pair, err := tls.X509KeyPair(cert, key)
	if err != nil {
		return fmt.Errorf("load %s: %w", f.Dir, err)
	}
	f.current.Store(&pair)
	return nil
}

// KeepRefreshed refreshes src every period until ctx ends; failures are
// logged and retried at the next period (the pair loaded last keeps serving).
func KeepRefreshed(ctx context.Context, src Source, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := src.Refresh(ctx); err != nil {
				klog.FromContext(ctx).Error(err, "Webhook certificate refresh failed; the current one keeps serving")
			}
		}
	}
}
