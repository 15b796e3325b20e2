package host

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"

	"github.com/kiln-dev/kiln/internal/wire"
)

// transportAuth authenticates the host's plugin connections with mutual TLS
// at the cost of one P-256 key per host process and one per start (tens of
// microseconds each), where go-plugin's AutoMTLS generates two P-521 keys per
// start (tens of milliseconds). The host's key signs its own certificate,
// which is both its client certificate and the authority for the certificate
// it issues each plugin start; the plugin gets both through its environment
// (wire.TransportCertEnv) and accepts only connections that present the
// host's certificate. See docs/design.md, "Plugin transport authentication".
type transportAuth struct {
	key     *ecdsa.PrivateKey
	cert    *x509.Certificate
	certPEM []byte
	client  tls.Certificate
	roots   *x509.CertPool
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
