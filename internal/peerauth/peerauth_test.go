package peerauth

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// handshake connects a client with token (checking that the listener is
// listenerPID) to a server that expects hostPID and want, and returns both
// sides' errors.
func handshake(t *testing.T, network string, hostPID, listenerPID int, want, token []byte) (serverErr, clientErr error) {
	t.Helper()
	addr := filepath.Join(t.TempDir(), "s")
	if network == "tcp" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer conn.Close()
		_, auth, err := Server(hostPID, want).ServerHandshake(conn)
		if err == nil && auth.(Info).PID != os.Getpid() {
			err = errors.New("wrong PID in the AuthInfo")
		}
		done <- err
	}()
	conn, err := net.Dial(network, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, _, clientErr = Client(token, func() int { return listenerPID }).ClientHandshake(context.Background(), "", conn)
	conn.Close() // a server still waiting for the rest of a token reads its end
	return <-done, clientErr
}

func TestHandshake(t *testing.T) {
	if !Supported() {
		t.Skip("no peer credentials on this system")
	}
	token, encoded, err := NewToken()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeToken(encoded); err != nil || !bytes.Equal(got, token) {
		t.Fatalf("DecodeToken(%q) = %x, %v", encoded, got, err)
	}
	me := os.Getpid()
	wrong := bytes.Clone(token)
	wrong[TokenBytes-1] ^= 0x80
	refused := func(err error, why string) bool {
		var r *RefusedError
		return errors.As(err, &r) && strings.Contains(r.Reason, why)
	}
	if s, c := handshake(t, "unix", me, me, token, token); s != nil || c != nil {
		t.Fatalf("the host with the token: server %v, client %v", s, c)
	}
	if s, _ := handshake(t, "unix", me, me, token, wrong); !refused(s, "wrong token") {
		t.Errorf("a wrong token: %v", s)
	}
	if s, _ := handshake(t, "unix", me, me, token, token[:TokenBytes/2]); !refused(s, "reading the token") {
		t.Errorf("a short token: %v", s)
	}
	if s, _ := handshake(t, "unix", me+1, me, token, token); !refused(s, "is not the host that started this plugin") {
		t.Errorf("another process: %v", s)
	}
	if _, c := handshake(t, "unix", me, me+1, token, token); !refused(c, "not the plugin this host started") {
		t.Errorf("a socket another process listens on: %v", c)
	}
	if s, c := handshake(t, "tcp", me, me, token, token); !refused(s, "not a unix socket") || !refused(c, "not a unix socket") {
		t.Errorf("TCP: server %v, client %v", s, c)
	}
}

func TestDecodeTokenRefusesOtherLengths(t *testing.T) {
	for _, s := range []string{"", "00", strings.Repeat("0", 2*TokenBytes-1), strings.Repeat("zz", TokenBytes), strings.Repeat("00", TokenBytes+1)} {
		if _, err := DecodeToken(s); err == nil || !strings.Contains(err.Error(), "Fix:") {
			t.Errorf("DecodeToken(%q) = %v, want an error with a Fix", s, err)
		}
	}
}

func FuzzDecodeToken(f *testing.F) {
	_, encoded, _ := NewToken()
	f.Add(encoded)
	f.Add("x")
	f.Fuzz(func(t *testing.T, s string) {
		token, err := DecodeToken(s)
		if err == nil && len(token) != TokenBytes {
			t.Fatalf("DecodeToken(%q) returned %d bytes", s, len(token))
		}
	})
}
