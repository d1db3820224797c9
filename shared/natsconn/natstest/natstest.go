// Package natstest makes throwaway credentials for tests against a real NATS server: a
// certificate authority with server and client certificates, and nkey users, written to the
// test's temporary directory. Nothing it makes is checked in or outlives the test.
package natstest

import (
	"bufio"
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

	"github.com/nats-io/nkeys"
)

// CA is a throwaway certificate authority.
type CA struct {
	// CertFile is the CA certificate, PEM (for --tlsca, or a server's client CA).
	CertFile string
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	dir      string
}

// NewCA creates a CA named name in a temporary directory.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	ca := &CA{cert: cert, key: key, dir: t.TempDir()}
	ca.CertFile = ca.write(t, name+"-ca.crt", "CERTIFICATE", der)
	return ca
}

// Server issues a certificate for a server on loopback (127.0.0.1, ::1, localhost), usable
// for routes too (serverAuth and clientAuth), and returns its certificate and key files.
func (ca *CA) Server(t testing.TB, name string) (certFile, keyFile string) {
	t.Helper()
	return ca.issue(t, name, &x509.Certificate{
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
}

// Client issues a client certificate (mutual TLS) and returns its certificate and key files.
func (ca *CA) Client(t testing.TB, name string) (certFile, keyFile string) {
	t.Helper()
	return ca.issue(t, name, &x509.Certificate{
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

func (ca *CA) issue(t testing.TB, name string, tmpl *x509.Certificate) (string, string) {
	t.Helper()
	key := newKey(t)
	tmpl.SerialNumber = serial(t)
	tmpl.Subject = pkix.Name{CommonName: name}
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return ca.write(t, name+".crt", "CERTIFICATE", der), ca.write(t, name+".key", "PRIVATE KEY", kder)
}

func (ca *CA) write(t testing.TB, name, typ string, der []byte) string {
	t.Helper()
	p := filepath.Join(ca.dir, name)
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// User is a throwaway nkey user.
type User struct {
	KeyPair nkeys.KeyPair
	// Public is the public key, for the server's users.
	Public string
	// SeedFile holds the seed, for --nkey.
	SeedFile string
}

// NewUser creates an nkey user and writes its seed to a temporary file.
func NewUser(t testing.TB) User {
	t.Helper()
	kp, err := nkeys.CreateUser()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := kp.Seed()
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(p, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	return User{KeyPair: kp, Public: pub, SeedFile: p}
}

// RouteGreeting opens a connection to a NATS route (cluster) port at addr as a peer node would
// and returns the first line the node sends, or the error that ends the connection instead. With
// tc nil the peer speaks plaintext; otherwise it does a TLS handshake with tc first. A node that
// accepts the peer sends its route INFO; one that refuses it closes the connection (with TLS
// 1.3 a refused client certificate shows as an alert on the first read).
func RouteGreeting(t testing.TB, addr string, tc *tls.Config) (string, error) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if tc == nil {
		if _, err := conn.Write([]byte("CONNECT {}\r\nPING\r\n")); err != nil {
			return "", err
		}
		return bufio.NewReader(conn).ReadString('\n')
	}
	tlsConn := tls.Client(conn, tc)
	if err := tlsConn.Handshake(); err != nil {
		return "", err
	}
	return bufio.NewReader(tlsConn).ReadString('\n')
}

// Presenting is a TLS client configuration that presents cert whatever authorities the server
// asks for, and does not check the server (what is under test is the server's check).
func Presenting(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // the server's check of the client is under test
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &cert, nil
		},
	}
}

// NoCertificate is a TLS client configuration without a certificate that does not check the
// server.
func NoCertificate() *tls.Config {
	return &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the server's check of the client is under test
}

// PlaintextPing connects to a NATS client port at addr without TLS, as a plaintext client
// would on the wire, reads the server's INFO line, sends CONNECT and PING in clear and returns
// the INFO line and what came back (a server that serves plaintext answers PONG; one that
// requires TLS does not).
func PlaintextPing(t testing.TB, addr string) (info, reply string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(conn)
	info, err = r.ReadString('\n')
	if err != nil {
		t.Fatalf("no INFO from %s: %v", addr, err)
	}
	if _, err := conn.Write([]byte("CONNECT {\"verbose\":false}\r\nPING\r\n")); err != nil {
		return info, ""
	}
	reply, _ = r.ReadString('\n')
	return info, reply
}
