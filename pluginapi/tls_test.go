package pluginapi

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/kiln-dev/kiln/internal/wire"
)

// selfSigned returns a PEM certificate and PEM key for localhost.
func selfSigned(t testing.TB) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"}, DNSNames: []string{"localhost"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd})
}

// TestTransportTLS: without wire.TransportCertEnv Serve leaves TLS to go-plugin;
// with it, it serves the issued certificate, requires the host's, and removes
// the issued key from the environment; broken input is an error, not a panic.
func TestTransportTLS(t *testing.T) {
	hostCert, _ := selfSigned(t)
	cert, key := selfSigned(t)
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	unset := func(k string) error { delete(env, k); return nil }

	env[clientCertEnv] = string(hostCert)
	if cfg, err := transportTLS(getenv, unset); cfg != nil || err != nil {
		t.Fatalf("without %s: %v, %v; want nil, nil (go-plugin's AutoMTLS)", wire.TransportCertEnv, cfg, err)
	}

	env[wire.TransportCertEnv] = string(cert) + string(key)
	cfg, err := transportTLS(getenv, unset)
	if err != nil || cfg == nil {
		t.Fatalf("with an issued certificate: %v, %v", cfg, err)
	}
	if len(cfg.Certificates) != 1 || cfg.ClientCAs == nil || cfg.ClientAuth.String() != "RequireAndVerifyClientCert" {
		t.Fatalf("the config does not require the host's certificate: %+v", cfg)
	}
	if _, ok := env[wire.TransportCertEnv]; ok {
		t.Fatalf("%s is still in the environment", wire.TransportCertEnv)
	}

	for name, e := range map[string]map[string]string{
		"no host certificate": {wire.TransportCertEnv: string(cert) + string(key)},
		"host cert not PEM":   {wire.TransportCertEnv: string(cert) + string(key), clientCertEnv: "junk"},
		"no key":              {wire.TransportCertEnv: string(cert), clientCertEnv: string(hostCert)},
	} {
		env = e
		if cfg, err := transportTLS(getenv, unset); err == nil {
			t.Errorf("%s: got %v, want an error", name, cfg)
		}
	}
}

// FuzzTransportTLS: whatever the environment holds, transportTLS returns a
// config or an error, never panics.
func FuzzTransportTLS(f *testing.F) {
	cert, key := selfSigned(f)
	f.Add(string(cert), string(cert)+string(key))
	f.Add("x", "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
	f.Fuzz(func(t *testing.T, host, issued string) {
		env := map[string]string{clientCertEnv: host, wire.TransportCertEnv: issued}
		_, _ = transportTLS(func(k string) string { return env[k] }, func(string) error { return nil })
	})
}
