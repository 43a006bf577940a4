// Package testcert makes throwaway TLS certificates for tests that start a
// real server with TLS: a certificate authority, a server certificate for
// the loopback addresses (127.0.0.1, ::1, localhost) and a client
// certificate, all signed by that authority, written as PEM files. Keys are
// ECDSA P-256 from crypto/rand; certificates are valid from an hour ago for
// a day. Nothing here is meant for production.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Set is one authority and the certificates it signed, as files in Dir.
type Set struct {
	Dir                   string
	CA                    string // the authority's certificate (PEM)
	ServerCert, ServerKey string
	ClientCert, ClientKey string

	pool *x509.CertPool
}

// New writes a fresh Set into dir (which must exist): ca.pem, server.pem,
// server-key.pem, client.pem and client-key.pem. Each call makes a new
// authority, so two Sets do not trust each other's certificates.
func New(dir string) (*Set, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := template("dlock test CA")
	caTmpl.IsCA, caTmpl.BasicConstraintsValid = true, true
	caTmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	s := &Set{Dir: dir, CA: filepath.Join(dir, "ca.pem"), pool: x509.NewCertPool()}
	s.pool.AddCert(ca)
	if err := writePEM(s.CA, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	server := template("127.0.0.1")
	server.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	server.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	server.DNSNames = []string{"localhost"}
	if s.ServerCert, s.ServerKey, err = issue(dir, "server", server, ca, caKey); err != nil {
		return nil, err
	}
	client := template("dlock test client")
	client.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if s.ClientCert, s.ClientKey, err = issue(dir, "client", client, ca, caKey); err != nil {
		return nil, err
	}
	return s, nil
}

// ForTest returns a new Set in a temporary directory of t, failing t if it
// cannot be made.
func ForTest(t testing.TB) *Set {
	t.Helper()
	s, err := New(t.TempDir())
	if err != nil {
		t.Fatalf("testcert: %v", err)
	}
	return s
}

// Pool returns a certificate pool holding the Set's authority.
func (s *Set) Pool() *x509.CertPool { return s.pool }

// ClientConfig returns a TLS configuration that trusts the Set's authority
// and presents its client certificate.
func (s *Set) ClientConfig() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(s.ClientCert, s.ClientKey)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: s.pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

func template(cn string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"dlock tests"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
}

// issue signs tmpl with the authority and writes NAME.pem and NAME-key.pem.
func issue(dir, name string, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (certFile, keyFile string, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return "", "", fmt.Errorf("testcert: sign %s: %w", name, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
		return "", "", err
	}
	return certFile, keyFile, writePEM(keyFile, "EC PRIVATE KEY", keyDER)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
