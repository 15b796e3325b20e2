package host

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"
)

// pluginAddr starts the plugin id on h and returns the unix socket it serves on.
func pluginAddr(t *testing.T, h *Host, id string) string {
	t.Helper()
	if _, err := h.Description(id); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	p := h.byID[id]
	h.mu.Unlock()
	if p == nil {
		t.Fatalf("no started plugin %s", id)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	rc := p.proc.client.ReattachConfig()
	if rc == nil || rc.Addr == nil || rc.Addr.Network() != "unix" {
		t.Fatalf("plugin %s has no unix socket: %+v", id, rc)
	}
	return rc.Addr.String()
}

// healthCheck dials the plugin's socket with creds and asks its gRPC health
// service, the one RPC every plugin answers.
func healthCheck(addr string, creds credentials.TransportCredentials) error {
	conn, err := grpc.NewClient("passthrough:///plugin",
		grpc.WithTransportCredentials(creds),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", addr)
		}))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = grpc_health_v1.NewHealthClient(conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{}, grpc.WaitForReady(false))
	return err
}

// TestPluginRefusesUnauthenticatedConnections: another process that reaches a
// plugin's socket gets no answer without the host's certificate: not over
// plain gRPC, not over TLS without a client certificate, not with a
// certificate of its own (another host's key). The host's own credentials get
// one, and the plugin serves the certificate the host issued for this start
// (the cheap path, not go-plugin's self-generated AutoMTLS one).
func TestPluginRefusesUnauthenticatedConnections(t *testing.T) {
	h := openHost(t, "fx-env")
	addr := pluginAddr(t, h, "fx-env")
	auth := h.plugins[0].set.auth
	other, err := newTransportAuth()
	if err != nil {
		t.Fatal(err)
	}
	for name, creds := range map[string]credentials.TransportCredentials{
		"plaintext":              insecure.NewCredentials(),
		"TLS without a cert":     credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}),
		"another host's cert":    credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{other.client}}),
		"the host's cert, wrong": credentials.NewTLS(&tls.Config{ServerName: "localhost", RootCAs: other.roots, Certificates: []tls.Certificate{auth.client}}),
	} {
		if err := healthCheck(addr, creds); err == nil {
			t.Errorf("%s: the plugin answered", name)
		}
	}
	_, cfg, err := auth.issue()
	if err != nil {
		t.Fatal(err)
	}
	if err := healthCheck(addr, credentials.NewTLS(cfg)); err != nil {
		t.Fatalf("the host's own credentials: %v", err)
	}
	conn, err := tls.Dial("unix", addr, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	leaf := conn.ConnectionState().PeerCertificates[0]
	if err := leaf.CheckSignatureFrom(auth.cert); err != nil {
		t.Fatalf("the plugin's certificate was not issued by the host: %v", err)
	}
}

// TestStartsWithoutMTLS: with NoMTLS the host passes no certificate and the
// plugin serves plain gRPC on its private socket.
func TestStartsWithoutMTLS(t *testing.T) {
	h := openWith(t, Options{NoMTLS: true}, "fx-env")
	addr := pluginAddr(t, h, "fx-env")
	if err := healthCheck(addr, insecure.NewCredentials()); err != nil {
		t.Fatalf("plaintext health check with NoMTLS: %v", err)
	}
}
