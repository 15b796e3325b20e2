package pluginapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/kiln-dev/kiln/internal/peerauth"
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

// TestAuthenticate: with a token (Linux) Serve's gRPC server accepts only this
// process (the host, here) sending the token, go-plugin's TLS is off and the
// token and PLUGIN_CLIENT_CERT leave the environment; with an issued
// certificate it serves TLS; with neither it leaves go-plugin in charge; a
// broken token is an error.
func TestAuthenticate(t *testing.T) {
	hostCert, _ := selfSigned(t)
	cert, key := selfSigned(t)
	newCfg := func() *plugin.ServeConfig { return serveConfig(&fakeBackend{}, hclog.NewNullLogger()) }
	run := func(env map[string]string) (*plugin.ServeConfig, error) {
		cfg := newCfg()
		err := authenticate(cfg, func(k string) string { return env[k] }, func(k string) error { delete(env, k); return nil }, os.Getpid())
		return cfg, err
	}

	cfg, err := run(map[string]string{clientCertEnv: string(hostCert)})
	if err != nil || cfg.TLSProvider != nil {
		t.Fatalf("neither token nor certificate: TLSProvider %v, %v; want go-plugin's AutoMTLS", cfg.TLSProvider != nil, err)
	}
	cfg, err = run(map[string]string{clientCertEnv: string(hostCert), wire.TransportCertEnv: string(cert) + string(key)})
	if err != nil || cfg.TLSProvider == nil {
		t.Fatalf("an issued certificate: TLSProvider %v, %v", cfg.TLSProvider != nil, err)
	}
	if tc, err := cfg.TLSProvider(); err != nil || tc.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Fatalf("the issued certificate's TLS: %+v, %v", tc, err)
	}
	if !peerauth.Supported() {
		return
	}
	if _, err := run(map[string]string{peerauth.TokenEnv: "abc"}); err == nil {
		t.Error("a broken token was accepted")
	}
	token, encoded, err := peerauth.NewToken()
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{clientCertEnv: string(hostCert), peerauth.TokenEnv: encoded}
	cfg, err = run(env)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLSProvider != nil || len(env) != 0 {
		t.Fatalf("with a token: TLSProvider %v, environment left %v", cfg.TLSProvider != nil, env)
	}
	srv := cfg.GRPCServer(nil)
	grpc_health_v1.RegisterHealthServer(srv, health.NewServer())
	addr := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", addr)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Stop()
	check := func(creds credentials.TransportCredentials) error {
		conn, err := grpc.NewClient("unix://"+addr, grpc.WithTransportCredentials(creds))
		if err != nil {
			return err
		}
		defer conn.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = grpc_health_v1.NewHealthClient(conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{})
		return err
	}
	if err := check(insecure.NewCredentials()); err == nil {
		t.Error("plain gRPC got an answer")
	}
	if err := check(peerauth.Client(token, os.Getpid)); err != nil {
		t.Errorf("the host with the token: %v", err)
	}
}
