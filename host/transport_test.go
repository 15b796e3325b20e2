package host

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health/grpc_health_v1"

	"github.com/kiln-dev/kiln/internal/peerauth"
	"github.com/kiln-dev/kiln/internal/wire"
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

// pluginEnv reads the environment the plugin id of h was started with, as
// another process of the same user can (/proc/<pid>/environ).
func pluginEnv(t *testing.T, h *Host, id string) (pid int, env map[string]string) {
	t.Helper()
	h.mu.Lock()
	p := h.byID[id]
	h.mu.Unlock()
	p.mu.Lock()
	pid = p.proc.pid
	p.mu.Unlock()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	env = map[string]string{}
	for _, kv := range strings.Split(string(data), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return pid, env
}

// peerDialEnv makes the test binary, started by
// TestPluginRefusesUnauthenticatedConnections, a process other than the host
// that knows the plugin's socket, pid and token: it dials and exits with 0
// when the plugin answered, 3 when it did not.
const peerDialEnv = "KILN_TEST_PEER_DIAL"

// peerDial is the test binary in that role: the environment holds
// "socket pid token-hex".
func peerDial(arg string) int {
	var addr, encoded string
	var pid int
	if _, err := fmt.Sscan(arg, &addr, &pid, &encoded); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	token, err := peerauth.DecodeToken(encoded)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := healthCheck(addr, peerauth.Client(token, func() int { return pid })); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	return 0
}

// TestPluginRefusesUnauthenticatedConnections: another process that reaches a
// plugin's socket gets no answer without what the host has. On Linux the
// plugin authenticates by peer credentials and token: not over plain gRPC
// (no token), not with a wrong token, not over TLS, and not from another
// process even with the right token (read from the plugin's environment, as
// another process of the same user can); the host's own process with the
// token gets one, the socket's directory is private, and go-plugin's own
// credentials did not win over the host's (the start worked: a TLS hello would
// have been a wrong token). Elsewhere (tlsOnly here) it is mutual TLS: not
// over plain gRPC, not over TLS without a client certificate, not with a
// certificate of its own (another host's key); the host's own credentials get
// one, and the plugin serves the certificate the host issued for this start
// (the cheap path, not go-plugin's self-generated AutoMTLS one).
func TestPluginRefusesUnauthenticatedConnections(t *testing.T) {
	other, err := newTransportAuth()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("peer", func(t *testing.T) {
		if !peerauth.Supported() {
			t.Skip("no peer credentials on this system: the host uses mutual TLS")
		}
		h := openHost(t, "fx-env")
		addr := pluginAddr(t, h, "fx-env")
		pid, env := pluginEnv(t, h, "fx-env")
		token, err := peerauth.DecodeToken(env[peerauth.TokenEnv])
		if err != nil {
			t.Fatalf("the plugin's environment has no token: %v", err)
		}
		if _, ok := env[wire.TransportCertEnv]; ok {
			t.Errorf("the host passed %s too: with peer credentials no certificate is issued", wire.TransportCertEnv)
		}
		wrong := bytes.Clone(token)
		wrong[0] ^= 1
		pidOf := func() int { return pid }
		for name, creds := range map[string]credentials.TransportCredentials{
			"plaintext (no token)": insecure.NewCredentials(),
			"a wrong token":        peerauth.Client(wrong, pidOf),
			"a short token":        peerauth.Client(token[:8], pidOf),
			"TLS without a cert":   credentials.NewTLS(&tls.Config{InsecureSkipVerify: true}),
			"another host's cert":  credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{other.client}}),
		} {
			if err := healthCheck(addr, creds); err == nil {
				t.Errorf("%s: the plugin answered", name)
			}
		}
		if err := healthCheck(addr, peerauth.Client(token, func() int { return pid + 1 })); err == nil {
			t.Error("the host's client accepted a socket another process listens on")
		}
		if err := healthCheck(addr, peerauth.Client(token, pidOf)); err != nil {
			t.Fatalf("the host's own process with the token: %v", err)
		}
		// The same dial as the one above that got an answer, from another
		// process: only the peer's pid differs.
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %s", peerDialEnv, addr, pid, env[peerauth.TokenEnv]))
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 3 {
			t.Errorf("another process with the token: %v, want it refused (exit 3):\n%s", err, out)
		}
		st, err := os.Stat(filepath.Dir(addr))
		if err != nil {
			t.Fatal(err)
		}
		if perm := st.Mode().Perm(); perm&0o077 != 0 {
			t.Errorf("the socket's directory %s has mode %v: other users could reach it", filepath.Dir(addr), perm)
		}
		if o := ownershipOf(st); o.uid != os.Getuid() {
			t.Errorf("the socket's directory is owned by user %d, not %d", o.uid, os.Getuid())
		}
	})
	t.Run("TLS", func(t *testing.T) {
		h := openWith(t, Options{tlsOnly: true}, "fx-env")
		addr := pluginAddr(t, h, "fx-env")
		auth := h.plugins[0].set.auth
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
	})
}

// TestOlderSDKFallsBackToAutoMTLS: a plugin whose SDK knows neither the
// token nor the issued certificate answers the host's certificate with
// go-plugin's AutoMTLS, and the host follows it there: it starts, and
// refuses plain gRPC.
func TestOlderSDKFallsBackToAutoMTLS(t *testing.T) {
	h := openHost(t, "fx-oldsdk")
	addr := pluginAddr(t, h, "fx-oldsdk")
	if err := healthCheck(addr, insecure.NewCredentials()); err == nil {
		t.Error("the plugin answered plain gRPC")
	}
	conn, err := tls.Dial("unix", addr, &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{h.plugins[0].set.auth.client}})
	if err != nil {
		t.Fatalf("the plugin does not serve TLS to the host's certificate: %v", err)
	}
	defer conn.Close()
	if leaf := conn.ConnectionState().PeerCertificates[0]; leaf.CheckSignatureFrom(h.plugins[0].set.auth.cert) == nil {
		t.Error("the plugin serves a certificate the host issued; want go-plugin's own (AutoMTLS)")
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
