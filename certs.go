package tether

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// LoadServerTLS returns the TLS config of the TCP listener of s: its
// certificate and key, and, with a client CA, the requirement that clients
// present a certificate that CA signed. TLS 1.2 at least.
func LoadServerTLS(s ServerConfig) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(s.TLSCert, s.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("load certificate and key: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if s.TLSClientCA != "" {
		pool, err := LoadCertPool(s.TLSClientCA)
		if err != nil {
			return nil, fmt.Errorf("client CA: %w", err)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// LoadCertPool reads the PEM certificates of the file at path into a pool
// (a CA to trust), failing when it holds none.
func LoadCertPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate in it", path)
	}
	return pool, nil
}
