package embedded

import (
	"crypto/tls"
	"fmt"

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
