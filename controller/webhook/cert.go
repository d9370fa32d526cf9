package webhook

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"time"
)

// Keys of the Secret that holds the webhook's certificate (the layout of a
// kubernetes.io/tls Secret, as cert-manager writes it, plus the CA).
const (
	KeyCA         = "ca.crt"
	KeyCert       = "tls.crt"
	KeyKey        = "tls.key"
	KeyPreviousCA = "ca-previous.crt" // kept in the caBundle through a rotation
)

// Validity of a generated CA and serving certificate, and how much of it
// may be left before they are replaced: a rotation well before the end
// leaves every replica time to load the new pair.
const (
	Validity    = 365 * 24 * time.Hour
	RenewBefore = 120 * 24 * time.Hour
)

// Certs is the webhook's CA and serving pair, PEM encoded.
type Certs struct {
	CA, Cert, Key, PreviousCA []byte
}

// CABundle is what the API server must trust: the current CA and, through a
// rotation, the previous one, so a replica still serving the old pair is
// trusted until it has loaded the new one.
func (c Certs) CABundle() []byte {
	return append(slices.Clone(c.CA), c.PreviousCA...)
}

// Generate makes a new CA and a serving certificate for dnsNames signed by
// it, valid from now for Validity. The previous CA (when there was one) is
// kept for the caBundle.
func Generate(dnsNames []string, now time.Time, previousCA []byte) (Certs, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Certs{}, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "sidecar-terminator webhook CA"},
		NotBefore:             now.Add(-time.Hour), // clock skew between nodes
		NotAfter:              now.Add(Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true, IsCA: true, MaxPathLenZero: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return Certs{}, fmt.Errorf("create CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return Certs{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Certs{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: dnsNames[0]},
		DNSNames:     dnsNames,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return Certs{}, fmt.Errorf("create serving certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return Certs{}, err
	}
	return Certs{
		CA:         pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		Cert:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:        pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		PreviousCA: previousCA,
	}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on a supported platform
	}
	return n
}

// NeedsRenewal says why certs must be replaced, or "" when they serve
// dnsNames, chain to their CA, and have more than RenewBefore left.
func NeedsRenewal(c Certs, dnsNames []string, now time.Time) string {
	if len(c.CA) == 0 || len(c.Cert) == 0 || len(c.Key) == 0 {
		return "no certificate yet"
	}
	pair, err := tls.X509KeyPair(c.Cert, c.Key)
	if err != nil {
		return "the serving pair does not load: " + err.Error()
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return "the serving certificate does not parse: " + err.Error()
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(c.CA) {
		return "the CA does not parse"
	}
	for _, n := range dnsNames {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: n, Roots: pool, CurrentTime: now}); err != nil {
			return fmt.Sprintf("the serving certificate is not valid for %s: %v", n, err)
		}
	}
	block, _ := pem.Decode(c.CA)
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return "the CA does not parse"
	}
	if end := earlier(leaf.NotAfter, ca.NotAfter); end.Sub(now) < RenewBefore {
		return fmt.Sprintf("it expires at %s", end.UTC().Format(time.RFC3339))
	}
	return ""
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// SameCA reports whether a caBundle already holds exactly the bundle.
func SameCA(have, want []byte) bool { return bytes.Equal(have, want) }

var errNoPair = errors.New("no serving certificate loaded yet")
