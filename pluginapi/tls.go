package pluginapi

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"

	"github.com/kiln-dev/kiln/internal/peerauth"
	"github.com/kiln-dev/kiln/internal/wire"
)

// authenticate sets how the server of cfg authenticates its host's
// connections, from the environment a kiln host started the plugin with
// (docs/design.md, "Plugin transport authentication"):
//   - with a token (peerauth.TokenEnv, Linux), a connection is accepted from
//     the process hostPID alone, running as this user, and only when its first
//     bytes are the token; the connection is not encrypted (it never leaves
//     the machine, on a socket in a directory only the user can enter), and
//     go-plugin's own AutoMTLS is turned off;
//   - with an issued certificate (wire.TransportCertEnv), it serves mutual TLS
//     (see transportTLS);
//   - otherwise go-plugin's AutoMTLS answers PLUGIN_CLIENT_CERT, or the
//     plugin serves plain gRPC (a host that asked for no authentication).
//
// The token and the issued key are removed from the environment, so that
// processes the plugin starts do not inherit them.
func authenticate(cfg *plugin.ServeConfig, getenv func(string) string, unsetenv func(string) error, hostPID int) error {
	if encoded := getenv(peerauth.TokenEnv); encoded != "" && peerauth.Supported() {
		_ = unsetenv(peerauth.TokenEnv)
		_ = unsetenv(clientCertEnv) // kept for plugins of older SDKs: go-plugin would answer it with AutoMTLS
		token, err := peerauth.DecodeToken(encoded)
		if err != nil {
			return err
		}
		creds := peerauth.Server(hostPID, token)
		server := cfg.GRPCServer
		cfg.GRPCServer = func(opts []grpc.ServerOption) *grpc.Server {
			return server(append(opts, grpc.Creds(creds)))
		}
		cfg.TLSProvider = nil
		return nil
	}
	tlsCfg, err := transportTLS(getenv, unsetenv)
	if err != nil || tlsCfg == nil {
		return err
	}
	cfg.TLSProvider = func() (*tls.Config, error) { return tlsCfg, nil }
	return nil
}

// clientCertEnv is where go-plugin passes the host's certificate (AutoMTLS).
const clientCertEnv = "PLUGIN_CLIENT_CERT"

// transportTLS is the TLS configuration Serve serves with: with the host's certificate
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
