package pluginapi

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"

	"github.com/kiln-dev/kiln/internal/wire"
)

// clientCertEnv is where go-plugin passes the host's certificate (AutoMTLS).
const clientCertEnv = "PLUGIN_CLIENT_CERT"

// transportTLS is Serve's go-plugin TLSProvider: with the host's certificate
// and an issued one in the environment, it serves with the issued one and
// requires the host's; without wire.TransportCertEnv it returns nil, leaving
// go-plugin's own AutoMTLS (or no TLS) in charge. getenv and unsetenv are the
// process environment's; the issued key is removed from it so that processes
// the plugin starts do not inherit it.
func transportTLS(getenv func(string) string, unsetenv func(string) error) (*tls.Config, error) {
	issued := getenv(wire.TransportCertEnv)
	if issued == "" {
		return nil, nil
	}
	_ = unsetenv(wire.TransportCertEnv)
	hostPEM := getenv(clientCertEnv)
	if hostPEM == "" {
		return nil, errors.New("the host passed a transport certificate but not its own (" + clientCertEnv + "). Fix: start the plugin from a kiln host")
	}
	hosts := x509.NewCertPool()
	if !hosts.AppendCertsFromPEM([]byte(hostPEM)) {
		return nil, errors.New("the host's certificate (" + clientCertEnv + ") is not a PEM certificate")
	}
	certPEM, keyPEM := splitPEM([]byte(issued))
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("the transport certificate in %s: %w", wire.TransportCertEnv, err)
	}
	return &tls.Config{
		Certificates:     []tls.Certificate{cert},
		ClientAuth:       tls.RequireAndVerifyClientCert,
		ClientCAs:        hosts,
		MinVersion:       tls.VersionTLS13,
		CurvePreferences: []tls.CurveID{tls.X25519},
	}, nil
}

// splitPEM separates the CERTIFICATE blocks of data from the others (the key).
func splitPEM(data []byte) (certs, keys []byte) {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return certs, keys
		}
		if b.Type == "CERTIFICATE" {
			certs = append(certs, pem.EncodeToMemory(b)...)
		} else {
			keys = append(keys, pem.EncodeToMemory(b)...)
		}
	}
}

// serveTLS is transportTLS on the process environment.
func serveTLS() (*tls.Config, error) { return transportTLS(os.Getenv, os.Unsetenv) }
