package driver

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLSFromFiles is for URL openers whose URLs name TLS files, as etcds://
// and mysql:// do with their cacert=, cert= and key= parameters. It returns
// a client configuration (TLS 1.2 or later) that checks the server's
// certificate against the PEM certificates in caFile, or against the
// system's roots when caFile is empty, and presents the client certificate
// in certFile with its key in keyFile (both or neither). A file that cannot
// be read or holds no usable PEM, or one of certFile and keyFile without
// the other, returns an error matching ErrInvalid.
func TLSFromFiles(caFile, certFile, keyFile string) (*tls.Config, error) {
	bad := func(format string, args ...any) (*tls.Config, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			return bad("cacert: %v", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(b) {
			return bad("cacert %s: no PEM certificate in it", caFile)
		}
	}
	if (certFile == "") != (keyFile == "") {
		return bad("%v", errors.New("give cert= and key= together (the client certificate and its key)"))
	}
	if certFile != "" {
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return bad("cert/key: %v", err)
		}
		tc.Certificates = []tls.Certificate{c}
	}
	return tc, nil
}
