package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

var dnsNames = []string{"st-webhook.st-system.svc", "st-webhook.st-system.svc.cluster.local"}

func keeper(client *fake.Clientset, now *time.Time) *Keeper {
	return &Keeper{Client: client, Namespace: "st-system", Secret: "st-webhook-tls", WebhookConfig: "st",
		DNSNames: dnsNames, Now: func() time.Time { return *now }}
}

func webhookConfig() *admissionregistrationv1.MutatingWebhookConfiguration {
	return &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "st"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "a.example.com"}, {Name: "b.example.com"}}}
}

func caBundles(t *testing.T, client *fake.Clientset) [][]byte {
	t.Helper()
	cfg, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(context.Background(), "st", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, w := range cfg.Webhooks {
		out = append(out, w.ClientConfig.CABundle)
	}
	return out
}

// handshake connects to a TLS server serving k's certificate, trusting only
// the configuration's caBundle, as the API server does.
func handshake(t *testing.T, k Source, bundle []byte, name string, at time.Time) error {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{GetCertificate: k.GetCertificate, MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(bundle)
	conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: pool, ServerName: name, MinVersion: tls.VersionTLS12, Time: func() time.Time { return at }})
	if err != nil {
		return err
	}
	return conn.Close()
}

func TestKeeperGeneratesStoresAndPatchesTheCABundle(t *testing.T) {
	client := fake.NewClientset(webhookConfig())
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	k := keeper(client, &now)
	if _, err := k.GetCertificate(nil); err == nil {
		t.Fatal("a certificate is served before any was loaded")
	}
	if err := k.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	bundles := caBundles(t, client)
	for i, b := range bundles {
		if len(b) == 0 {
			t.Fatalf("webhook %d has no caBundle", i)
		}
	}
	if err := handshake(t, k, bundles[0], dnsNames[0], now); err != nil {
		t.Fatalf("the API server would not trust the served certificate: %v", err)
	}
	if err := handshake(t, k, bundles[0], "other.svc", now); err == nil {
		t.Fatal("the certificate is valid for a name it was not made for")
	}

	// A second replica reads the same pair and writes nothing new.
	s1, _ := client.CoreV1().Secrets("st-system").Get(context.Background(), "st-webhook-tls", metav1.GetOptions{})
	other := keeper(client, &now)
	if err := other.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	s2, _ := client.CoreV1().Secrets("st-system").Get(context.Background(), "st-webhook-tls", metav1.GetOptions{})
	if string(s1.Data[KeyCert]) != string(s2.Data[KeyCert]) {
		t.Fatal("a second replica replaced a valid certificate")
	}
	if err := handshake(t, other, bundles[0], dnsNames[1], now); err != nil {
		t.Fatalf("the second replica's certificate is not trusted: %v", err)
	}
}

func TestKeeperRotatesBeforeExpiryAndTrustsBothCAsThrough(t *testing.T) {
	client := fake.NewClientset(webhookConfig())
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	k := keeper(client, &now)
	if err := k.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	oldBundle := caBundles(t, client)[0]
	// A replica that loaded the old pair and has not refreshed yet.
	stale := keeper(client, &now)
	if err := stale.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}

	now = now.Add(Validity - RenewBefore - time.Hour)
	if err := k.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if string(caBundles(t, client)[0]) != string(oldBundle) {
		t.Fatal("rotated while more than RenewBefore was left")
	}

	now = now.Add(2 * time.Hour)
	if err := k.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	bundle := caBundles(t, client)[0]
	if string(bundle) == string(oldBundle) {
		t.Fatal("not rotated within RenewBefore of the end")
	}
	if err := handshake(t, k, bundle, dnsNames[0], now); err != nil {
		t.Fatalf("the new certificate is not trusted: %v", err)
	}
	if err := handshake(t, stale, bundle, dnsNames[0], now); err != nil {
		t.Fatalf("a replica still serving the old certificate is not trusted through the rotation: %v", err)
	}
}

func TestFilesServesWhatCertManagerWrote(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	certs, err := Generate(dnsNames, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := &Files{Dir: dir}
	if err := f.Refresh(context.Background()); err == nil {
		t.Fatal("loaded a pair from an empty directory")
	}
	writeFile(t, dir, KeyCert, certs.Cert)
	writeFile(t, dir, KeyKey, certs.Key)
	if err := f.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := handshake(t, f, certs.CA, dnsNames[0], now); err != nil {
		t.Fatal(err)
	}
}

func TestNeedsRenewal(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	good, err := Generate(dnsNames, now, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, _ := Generate(dnsNames, now, nil)
	cases := map[string]struct {
		certs Certs
		names []string
		at    time.Time
		renew bool
	}{
		"fresh":                  {certs: good, names: dnsNames, at: now},
		"empty":                  {certs: Certs{}, names: dnsNames, at: now, renew: true},
		"close to the end":       {certs: good, names: dnsNames, at: now.Add(Validity - RenewBefore + time.Hour), renew: true},
		"a name it lacks":        {certs: good, names: []string{"new.svc"}, at: now, renew: true},
		"a CA that did not sign": {certs: Certs{CA: other.CA, Cert: good.Cert, Key: good.Key}, names: dnsNames, at: now, renew: true},
		"a key of another pair":  {certs: Certs{CA: good.CA, Cert: good.Cert, Key: other.Key}, names: dnsNames, at: now, renew: true},
	}
	for name, tc := range cases {
		if why := NeedsRenewal(tc.certs, tc.names, tc.at); (why != "") != tc.renew {
			t.Errorf("%s: NeedsRenewal = %q, want renewal %v", name, why, tc.renew)
		}
	}
}

func writeFile(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	if err := writeFileAtomic(dir, name, data); err != nil {
		t.Fatal(err)
	}
}

func writeFileAtomic(dir, name string, data []byte) error {
	return os.WriteFile(filepath.Join(dir, name), data, 0o600)
}
