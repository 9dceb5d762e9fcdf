package egressproxy

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"time"
)

// errPeeked ends the handshake sniServerName starts, once it has the
// client's hello.
var errPeeked = errors.New("peeked")

// sniServerName reads what a tunnel's client sends first and, if it is a
// TLS ClientHello, returns the server name it asks for (SNI; "" none) and
// tls true. What it read is returned too, to be sent on as it was.
func sniServerName(c net.Conn) (name string, isTLS bool, read []byte, err error) {
	var buf bytes.Buffer
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	// The first byte says whether it is TLS (a handshake record, 0x16).
	first := make([]byte, 1)
	if _, err := io.ReadFull(c, first); err != nil {
		return "", false, nil, err
	}
	buf.Write(first)
	if first[0] != 0x16 {
		return "", false, buf.Bytes(), nil
	}
	hello := tls.Server(&recording{r: io.MultiReader(bytes.NewReader(first), io.TeeReader(c, &buf))}, &tls.Config{
		GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
			name, isTLS = h.ServerName, true
			return nil, errPeeked
		},
	})
	if err := hello.Handshake(); !errors.Is(err, errPeeked) && !isTLS {
		return "", false, buf.Bytes(), nil // not a hello the proxy can read: no name to check
	}
	return strings.ToLower(name), true, buf.Bytes(), nil
}

// recording is a connection that only reads, from r: a TLS server's
// handshake reads the client's hello from it and writes nowhere.
type recording struct {
	net.Conn
	r io.Reader
}

func (c *recording) Read(b []byte) (int, error)  { return c.r.Read(b) }
func (c *recording) Write(b []byte) (int, error) { return len(b), nil }
func (c *recording) Close() error                { return nil }
func (c *recording) LocalAddr() net.Addr         { return &net.TCPAddr{} }
func (c *recording) RemoteAddr() net.Addr        { return &net.TCPAddr{} }
func (c *recording) SetDeadline(time.Time) error { return nil }

func (c *recording) SetReadDeadline(time.Time) error  { return nil }
func (c *recording) SetWriteDeadline(time.Time) error { return nil }

// replay is a connection whose first reads are of what was read from it
// already.
type replay struct {
	net.Conn
	r io.Reader
}

func (c *replay) Read(b []byte) (int, error) { return c.r.Read(b) }

// CloseWrite half-closes the connection, where it can.
func (c *replay) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}
