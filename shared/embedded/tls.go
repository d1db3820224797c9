package embedded

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// ServerTLS loads a server certificate and key (PEM files) into a Config.TLS. With clientCA
// (a PEM file of CA certificates) the server requires and verifies client certificates signed
// by it: mutual TLS. It is what `maintctl up --tlscert --tlskey [--tlsca]` passes.
func ServerTLS(certFile, keyFile, clientCA string) (*tls.Config, error) {
	if certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("%w: TLS needs both a certificate and a key file", ErrInvalidConfig)
	}
	// nats-server's own loader: the same checks and cipher defaults as a config file's tls {}.
	c, err := server.GenTLSConfig(&server.TLSConfigOpts{
		CertFile: certFile,
		KeyFile:  keyFile,
		CaFile:   clientCA,
		Verify:   clientCA != "",
		Timeout:  2,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: TLS: %w", ErrInvalidConfig, err)
	}
	return c, nil
}

// RouteTLSName is the name in the route certificates NewRouteTLS makes; a node checks it in the
// certificate of the node it dials, whatever the address.
const RouteTLSName = "maint-route"

// NewRouteTLS makes the mutual TLS of the routes of a cluster whose nodes all run in this
// process: a certificate authority made in memory, and one certificate it signs (for
// RouteTLSName, as server and as client) that every node presents. Each node accepts, and
// dials, only a peer with a certificate of that authority: a route connection without one is
// refused. Nothing is written to disk and the authority's key is dropped at once, so no other
// process can ever join; every start makes a new one.
func NewRouteTLS() (*tls.Config, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("embedded: route CA key: %w", err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          randSerial(),
		Subject:               pkix.Name{CommonName: RouteTLSName + " CA (in memory)"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("embedded: route CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("embedded: route CA: %w", err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("embedded: route key: %w", err)
	}
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: randSerial(),
		Subject:      pkix.Name{CommonName: RouteTLSName},
		DNSNames:     []string{RouteTLSName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("embedded: route certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		RootCAs:      pool, // a dialing node checks the node it reaches
		ClientCAs:    pool, // an accepting node checks the node that dials
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ServerName:   RouteTLSName,
		MinVersion:   tls.VersionTLS13,
	}, nil
}

// validateRouteTLS checks that t is mutual TLS: a certificate to present, and the authorities
// to check the peer's, both ways.
func validateRouteTLS(t *tls.Config) error {
	switch {
	case t == nil:
		return nil
	case len(t.Certificates) == 0 && t.GetCertificate == nil:
		return fmt.Errorf("%w: RouteTLS has no certificate", ErrInvalidConfig)
	case t.ClientAuth != tls.RequireAndVerifyClientCert || t.ClientCAs == nil:
		return fmt.Errorf("%w: RouteTLS must require and verify the certificate of the dialing node (ClientAuth, ClientCAs)", ErrInvalidConfig)
	case t.RootCAs == nil || t.InsecureSkipVerify:
		return fmt.Errorf("%w: RouteTLS must verify the certificate of the node it dials (RootCAs)", ErrInvalidConfig)
	}
	return nil
}

func randSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(err) // crypto/rand does not fail
	}
	return n
}
