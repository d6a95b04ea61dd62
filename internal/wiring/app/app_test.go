package app_test

import (
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

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"

	"github.com/pollux-dev/pollux/internal/platform/config"
	"github.com/pollux-dev/pollux/internal/testkit/natstest"
	"github.com/pollux-dev/pollux/internal/wiring/app"
)

func run(t *testing.T, opts *server.Options) *server.Server {
	t.Helper()
	opts.Host, opts.Port, opts.NoLog, opts.NoSigs = "127.0.0.1", -1, true, true
	s, err := server.NewServer(opts)
	require.NoError(t, err)
	go s.Start()
	require.True(t, s.ReadyForConnections(10*time.Second))
	t.Cleanup(s.Shutdown)
	return s
}

func connects(t *testing.T, s *server.Server, c config.NATS) error {
	t.Helper()
	auth, err := app.Auth(c)
	if err != nil {
		return err
	}
	url := s.ClientURL()
	if c.TLS.Enabled() {
		url = "tls://" + s.Addr().String()
	}
	nc, err := app.Connect(url, "test", append(auth, noRetry), zerolog.Nop())
	if err != nil {
		return err
	}
	defer nc.Close()
	return nc.Flush()
}

// noRetry makes a refused connection fail at once.
var noRetry nats.Option = func(o *nats.Options) error { o.RetryOnFailedConnect = false; return nil }

func TestUserPassword(t *testing.T) {
	s := run(t, &server.Options{Username: "pollux", Password: "s3cret"})
	t.Setenv("TEST_NATS_PW", "s3cret")
	require.NoError(t, connects(t, s, config.NATS{User: "pollux", PasswordEnv: "TEST_NATS_PW"}))
	t.Setenv("TEST_NATS_PW", "wrong")
	require.Error(t, connects(t, s, config.NATS{User: "pollux", PasswordEnv: "TEST_NATS_PW"}))
}

func TestToken(t *testing.T) {
	s := run(t, &server.Options{Authorization: "tok-123"})
	path := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(path, []byte("tok-123\n"), 0o600))
	require.NoError(t, connects(t, s, config.NATS{TokenFile: path}))
	require.Error(t, connects(t, s, config.NATS{}), "no token, no entry")
}

func TestNKey(t *testing.T) {
	kp, err := nkeys.CreateUser()
	require.NoError(t, err)
	pub, err := kp.PublicKey()
	require.NoError(t, err)
	seed, err := kp.Seed()
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "user.nk")
	require.NoError(t, os.WriteFile(path, seed, 0o600))
	s := run(t, &server.Options{Nkeys: []*server.NkeyUser{{Nkey: pub}}})
	require.NoError(t, connects(t, s, config.NATS{NKeyFile: path}))
	require.Error(t, connects(t, s, config.NATS{}))
}

func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca, caKey := selfSigned(t, "pollux-test-ca", nil, nil, true)
	writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", ca.Raw)
	srvCert, srvKey := selfSigned(t, "127.0.0.1", ca, caKey, false)
	cliCert, cliKey := selfSigned(t, "pollux", ca, caKey, false)
	writePEM(t, filepath.Join(dir, "client.pem"), "CERTIFICATE", cliCert.Raw)
	writeKey(t, filepath.Join(dir, "client.key"), cliKey)

	pool := x509.NewCertPool()
	pool.AddCert(ca)
	s := run(t, &server.Options{TLS: true, TLSVerify: true, TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{srvCert.Raw}, PrivateKey: srvKey}},
		ClientCAs:    pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	}})
	good := config.NATS{TLS: config.TLS{CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "client.pem"), KeyFile: filepath.Join(dir, "client.key")}}
	require.NoError(t, connects(t, s, good))
	require.Error(t, connects(t, s, config.NATS{TLS: config.TLS{CAFile: filepath.Join(dir, "ca.pem")}}), "no client certificate")
}

func selfSigned(t *testing.T, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, isCA bool) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IsCA:        isCA, BasicConstraintsValid: true,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return cert, key
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
}

func writeKey(t *testing.T, path string, key *ecdsa.PrivateKey) {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	writePEM(t, path, "EC PRIVATE KEY", der)
}

// The front door's intake connection reaches the servers the process's
// connection does, with its credentials, and keeps no reconnect buffer:
// while the server is down a publish on it is refused at once, never
// kept to go out when the server is back.
func TestTheIntakeConnectionKeepsNoReconnectBuffer(t *testing.T) {
	r := natstest.NewRestartable(t)
	nc, err := app.Connect(r.URL(), "pollux-test", nil, zerolog.Nop())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	in, err := app.IntakeConn(nc)
	require.NoError(t, err)
	t.Cleanup(in.Close)
	require.Equal(t, "pollux-test-intake", in.Opts.Name)
	require.NoError(t, in.Flush())
	r.Stop()
	require.Eventually(t, func() bool { return !in.IsConnected() }, 10*time.Second, 10*time.Millisecond)
	require.ErrorIs(t, in.Publish("pollux.submit.sim", []byte("{}")), nats.ErrReconnectBufExceeded)
	require.NoError(t, nc.Publish("pollux.submit.sim", []byte("{}")), "the process's own connection buffers")
	r.Start(t)
	require.Eventually(t, func() bool { return in.IsConnected() }, 20*time.Second, 10*time.Millisecond)
}
