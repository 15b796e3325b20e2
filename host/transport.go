package host

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"

	goplugin "github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/kiln-dev/kiln/internal/peerauth"
	"github.com/kiln-dev/kiln/internal/wire"
)

// transportAuth authenticates the host's plugin connections (see
// docs/design.md, "Plugin transport authentication"). Where the kernel names
// a unix socket's peer (Linux), each start gets a random token: the plugin
// accepts a connection only from the host's process whose first bytes are the
// token, and the host connects only to a socket the plugin process it started
// listens on (package peerauth); no handshake crosses the socket but the
// token. Elsewhere (or with tlsOnly) it is mutual TLS at the cost of one
// P-256 key per host process and one per start (tens of microseconds each),
// where go-plugin's AutoMTLS generates two P-521 keys per start (tens of
// milliseconds). The host's key signs its own certificate, which is both its
// client certificate and the authority for the certificate it issues each
// plugin start; the plugin gets both through its environment
// (wire.TransportCertEnv) and accepts only connections that present the
// host's certificate. Plugins of an older SDK, which know neither, answer the
// host's certificate with go-plugin's AutoMTLS.
type transportAuth struct {
	key     *ecdsa.PrivateKey
	cert    *x509.Certificate
	certPEM []byte
	client  tls.Certificate
	roots   *x509.CertPool
	// tlsOnly keeps mutual TLS where peer credentials would do (tests of
	// the other systems' path).
	tlsOnly bool
}

// configure sets up cfg's authentication for one plugin start and returns the
// environment to start the plugin with. pluginPID reports the started
// plugin's process id (0 before it runs).
func (a *transportAuth) configure(cfg *goplugin.ClientConfig, pluginPID func() int) ([]string, error) {
	if a.tlsOnly || !peerauth.Supported() {
		env, tlsCfg, err := a.issue()
		cfg.TLSConfig = tlsCfg
		return env, err
	}
	token, encoded, err := peerauth.NewToken()
	if err != nil {
		return nil, err
	}
	// go-plugin fills RootCAs with the certificate an older SDK's plugin
	// answers PLUGIN_CLIENT_CERT with (AutoMTLS).
	cfg.TLSConfig = &tls.Config{
		Certificates:     []tls.Certificate{a.client},
		ServerName:       "localhost",
		MinVersion:       tls.VersionTLS12,
		CurvePreferences: []tls.CurveID{tls.X25519},
	}
	// go-plugin dials with its own credentials first and these options after
	// them: the last transport credentials win.
	cfg.GRPCDialOptions = append(cfg.GRPCDialOptions, grpc.WithTransportCredentials(
		&startCreds{TransportCredentials: peerauth.Client(token, pluginPID), fallback: cfg.TLSConfig}))
	return []string{
		"PLUGIN_CLIENT_CERT=" + string(a.certPEM),
		peerauth.TokenEnv + "=" + encoded,
	}, nil
}

// startCreds are the peer credentials of one start, unless the plugin
// answered with a certificate of its own in its handshake line (an older
// SDK's AutoMTLS): then fallback, whose RootCAs go-plugin set to that
// certificate, is TLS's configuration.
type startCreds struct {
	credentials.TransportCredentials
	fallback *tls.Config
}

func (c *startCreds) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	if c.fallback.RootCAs != nil {
		// gRPC's authority is go-plugin's placeholder target; the certificate
		// names the fallback's ServerName.
		return credentials.NewTLS(c.fallback).ClientHandshake(ctx, c.fallback.ServerName, conn)
	}
	return c.TransportCredentials.ClientHandshake(ctx, authority, conn)
}

func (c *startCreds) Clone() credentials.TransportCredentials {
	return &startCreds{TransportCredentials: c.TransportCredentials.Clone(), fallback: c.fallback}
}

// transportLifetime is how long the certificates are valid: a plugin's
// connection is verified when it is made, and gRPC may reconnect later.
const transportLifetime = 10 * 365 * 24 * time.Hour

// newTransportAuth generates the host's key and certificate.
func newTransportAuth() (*transportAuth, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate the host's transport key: %w", err)
	}
	tmpl, err := certTemplate("kiln host")
	if err != nil {
		return nil, err
	}
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth, x509.ExtKeyUsageServerAuth}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("create the host's transport certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse the host's transport certificate: %w", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	return &transportAuth{
		key: key, cert: cert, roots: roots,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		client:  tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert},
	}, nil
}

// certTemplate is a certificate for the name "localhost" (go-plugin's server
// name) with a random serial number.
func certTemplate(org string) (*x509.Certificate, error) {
	sn, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("draw a certificate serial number: %w", err)
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: "localhost", Organization: []string{org}},
		DNSNames:     []string{"localhost"},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(transportLifetime),
	}, nil
}

// issue returns, for one plugin start, the environment to pass the plugin (the
// host's certificate in go-plugin's PLUGIN_CLIENT_CERT, the start's own
// certificate and key in wire.TransportCertEnv) and the client TLS
// configuration that trusts only that start's certificate's issuer, the host.
func (a *transportAuth) issue() ([]string, *tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate a plugin's transport key: %w", err)
	}
	tmpl, err := certTemplate("kiln plugin")
	if err != nil {
		return nil, nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return nil, nil, fmt.Errorf("issue a plugin's transport certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encode a plugin's transport key: %w", err)
	}
	var issued bytes.Buffer
	_ = pem.Encode(&issued, &pem.Block{Type: "CERTIFICATE", Bytes: der}) // a bytes.Buffer does not fail
	_ = pem.Encode(&issued, &pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	env := []string{
		"PLUGIN_CLIENT_CERT=" + string(a.certPEM),
		wire.TransportCertEnv + "=" + issued.String(),
	}
	return env, &tls.Config{
		Certificates:     []tls.Certificate{a.client},
		RootCAs:          a.roots.Clone(),
		ServerName:       "localhost",
		MinVersion:       tls.VersionTLS12,
		CurvePreferences: []tls.CurveID{tls.X25519},
	}, nil
}

// pluginPID is the started plugin's process id, 0 before it runs: the peer
// credentials accept only a socket this process listens on.
func (pr *process) pluginPID() int {
	if pr.runner == nil {
		return 0
	}
	return pr.runner.processID()
}
