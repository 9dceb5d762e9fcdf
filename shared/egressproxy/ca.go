package egressproxy

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"sync"
	"time"
)

// authority is one sandbox's certificate authority: what the proxy signs
// the certificates of the hosts it terminates TLS for with. Its key never
// leaves the proxy; the sandbox trusts its certificate only.
type authority struct {
	cert    *x509.Certificate
	key     crypto.Signer
	pem     []byte
	mu      sync.Mutex
	leaves  map[string]*tls.Certificate // by host
	expires time.Time
}

// leafLife is how long a host's certificate lives; it is minted again
// when less than a quarter of it is left.
const leafLife = time.Hour

// newAuthority makes sandbox id's authority. With a master key, its key is
// derived from it (an Ed25519 key whose seed is HMAC-SHA256(master, id)):
// every proxy of a fleet holding the master makes the same key, so a
// sandbox trusting one's certificate trusts the others' leaves. Without,
// its key is random (one proxy alone).
func newAuthority(id string, master []byte, now time.Time, life time.Duration) (*authority, error) {
	var key crypto.Signer
	if len(master) > 0 {
		mac := hmac.New(sha256.New, master)
		mac.Write([]byte("remote-agents egress CA\x00" + id))
		key = ed25519.NewKeyFromSeed(mac.Sum(nil))
	} else {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, err
		}
		key = k
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "Remote Agents egress proxy, sandbox " + id, Organization: []string{"Remote Agents"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(life),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &authority{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		leaves: map[string]*tls.Certificate{}, expires: tmpl.NotAfter}, nil
}

// leaf returns host's certificate, signed by a.
func (a *authority) leaf(host string, now time.Time) (*tls.Certificate, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.leaves[host]; ok && now.Before(c.Leaf.NotAfter.Add(-leafLife/4)) {
		return c, nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	notAfter := now.Add(leafLife)
	if a.cert.NotAfter.Before(notAfter) {
		notAfter = a.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: host},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if ip := net.ParseIP(host); ip != nil {
		tmpl.IPAddresses = []net.IP{ip}
	} else {
		tmpl.DNSNames = []string{host}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, fmt.Errorf("sign %s: %w", host, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	c := &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
	a.leaves[host] = c
	return c, nil
}
