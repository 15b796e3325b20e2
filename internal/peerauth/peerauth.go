package peerauth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"google.golang.org/grpc/credentials"
)

// TokenEnv names the environment variable in which a host passes a plugin the
// start's token, hex-encoded.
const TokenEnv = "KILN_PLUGIN_TOKEN"

// TokenBytes is the length of a token: 256 random bits.
const TokenBytes = 32

// handshakeTimeout bounds how long the server waits for a connection's token.
const handshakeTimeout = 10 * time.Second

// NewToken draws a token and returns it with its TokenEnv encoding.
func NewToken() (token []byte, encoded string, err error) {
	token = make([]byte, TokenBytes)
	if _, err := rand.Read(token); err != nil {
		return nil, "", fmt.Errorf("draw a plugin connection token: %w", err)
	}
	return token, hex.EncodeToString(token), nil
}

// DecodeToken reads a token in its TokenEnv encoding.
func DecodeToken(encoded string) ([]byte, error) {
	token, err := hex.DecodeString(encoded)
	if err != nil || len(token) != TokenBytes {
		return nil, fmt.Errorf("%s is not %d hex-encoded bytes. Fix: start the plugin from a kiln host", TokenEnv, TokenBytes)
	}
	return token, nil
}

// Supported reports whether this system gives a unix socket's peer
// credentials; where it does not, the host keeps mutual TLS.
func Supported() bool { return peerSupported }

// RefusedError is why a connection was refused.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return "kiln peer authentication: " + e.Reason }

// Info is the AuthInfo of an authenticated connection.
type Info struct {
	credentials.CommonAuthInfo
	// PID and UID are the peer process's, as the kernel reported them.
	PID, UID int
}

// AuthType implements credentials.AuthInfo.
func (Info) AuthType() string { return authType }

const authType = "kiln-peer"

// info says the connection is private: a unix socket in a directory only the
// host's user can enter, between two processes the kernel named.
func info(pid, uid int) Info {
	return Info{CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}, PID: pid, UID: uid}
}

// Server returns the plugin side's credentials: a connection is accepted when
// the process at its other end is hostPID, runs as this process's user, and
// sends token first.
func Server(hostPID int, token []byte) credentials.TransportCredentials {
	return &serverCreds{hostPID: hostPID, uid: os.Getuid(), token: token}
}

type serverCreds struct {
	hostPID, uid int
	token        []byte
}

func (s *serverCreds) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	pid, uid, err := peerOf(conn)
	if err != nil {
		return nil, nil, err
	}
	if pid != s.hostPID || uid != s.uid {
		return nil, nil, &RefusedError{Reason: fmt.Sprintf("process %d (user %d) is not the host that started this plugin (process %d, user %d)", pid, uid, s.hostPID, s.uid)}
	}
	got := make([]byte, len(s.token))
	if err := conn.SetReadDeadline(time.Now().Add(handshakeTimeout)); err != nil {
		return nil, nil, fmt.Errorf("kiln peer authentication: %w", err)
	}
	if _, err := io.ReadFull(conn, got); err != nil {
		return nil, nil, &RefusedError{Reason: fmt.Sprintf("reading the token: %v", err)}
	}
	if subtle.ConstantTimeCompare(got, s.token) != 1 {
		return nil, nil, &RefusedError{Reason: "wrong token"}
	}
	if err := conn.SetReadDeadline(time.Time{}); err != nil {
		return nil, nil, fmt.Errorf("kiln peer authentication: %w", err)
	}
	return conn, info(pid, uid), nil
}

func (s *serverCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("kiln peer authentication: the server's credentials cannot dial")
}

func (s *serverCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: authType}
}

func (s *serverCreds) Clone() credentials.TransportCredentials {
	c := *s
	return &c
}

func (s *serverCreds) OverrideServerName(string) error { return nil }

// Client returns the host side's credentials: a connection is made when the
// process listening at its other end is pluginPID() (the plugin the host
// started) and runs as this process's user; then it sends token.
func Client(token []byte, pluginPID func() int) credentials.TransportCredentials {
	return &clientCreds{token: token, pluginPID: pluginPID, uid: os.Getuid()}
}

type clientCreds struct {
	token     []byte
	pluginPID func() int
	uid       int
}

func (c *clientCreds) ClientHandshake(ctx context.Context, _ string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	pid, uid, err := peerOf(conn)
	if err != nil {
		return nil, nil, err
	}
	if want := c.pluginPID(); pid != want || uid != c.uid {
		return nil, nil, &RefusedError{Reason: fmt.Sprintf("the socket is served by process %d (user %d), not the plugin this host started (process %d, user %d)", pid, uid, want, c.uid)}
	}
	if deadline, ok := ctx.Deadline(); ok {
		if err := conn.SetWriteDeadline(deadline); err != nil {
			return nil, nil, fmt.Errorf("kiln peer authentication: %w", err)
		}
		defer conn.SetWriteDeadline(time.Time{})
	}
	if _, err := conn.Write(c.token); err != nil {
		return nil, nil, fmt.Errorf("kiln peer authentication: sending the token: %w", err)
	}
	return conn, info(pid, uid), nil
}

func (c *clientCreds) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("kiln peer authentication: the client's credentials cannot serve")
}

func (c *clientCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: authType}
}

func (c *clientCreds) Clone() credentials.TransportCredentials {
	d := *c
	return &d
}

func (c *clientCreds) OverrideServerName(string) error { return nil }
