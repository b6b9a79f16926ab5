package etcdtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/vigilcdn/vigil/internal/testnet"
)

// Binary is the etcd server the tests run (VIGIL_ETCD overrides it).
var Binary = "/usr/bin/etcd"

// Server is one running etcd member.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT (https:// from StartTLS)
	// TLS is what Client uses to reach a server from StartTLS.
	TLS     *tls.Config
	cmd     *exec.Cmd
	mu      sync.Mutex
	log     bytes.Buffer
	stopped bool
}

// freePort is a loopback port reserved for t (internal/testnet).
func freePort(t testing.TB) int {
	t.Helper()
	_, p, _ := net.SplitHostPort(testnet.Addr(t))
	port, _ := strconv.Atoi(p)
	return port
}

// Require skips (or, with CI set, fails) the test when etcd is missing.
func Require(t testing.TB) string {
	t.Helper()
	bin := Binary
	if b := os.Getenv("VIGIL_ETCD"); b != "" {
		bin = b
	}
	if _, err := os.Stat(bin); err != nil {
		msg := fmt.Sprintf("%s not found: install Debian's etcd-server (apt-get install -y etcd-server) or set VIGIL_ETCD", bin)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return bin
}

// Start runs etcd on free loopback ports with a temporary data dir; it is
// killed at the end of the test.
func Start(t testing.TB, extraArgs ...string) *Server {
	t.Helper()
	return start(t, "http", nil, extraArgs...)
}

// TLSFiles are the PEM files of an etcd that serves its clients over TLS:
// its certificate and key, the CA that signs client certificates, and a
// client certificate and key that Client uses.
type TLSFiles struct {
	CertFile, KeyFile, ClientCAFile string
	ClientCertFile, ClientKeyFile   string
	// CA is the CA certificate (PEM) that signed CertFile.
	CA []byte
}

// StartTLS is Start with https for clients and --client-cert-auth: a
// client needs a certificate signed by f.ClientCAFile.
func StartTLS(t testing.TB, f TLSFiles, extraArgs ...string) *Server {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(f.ClientCertFile, f.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(f.CA)
	tc := &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	return start(t, "https", tc, append([]string{"--client-cert-auth", "--trusted-ca-file", f.ClientCAFile,
		"--cert-file", f.CertFile, "--key-file", f.KeyFile}, extraArgs...)...)
}

func start(t testing.TB, scheme string, tc *tls.Config, extraArgs ...string) *Server {
	t.Helper()
	bin := Require(t)
	cport, pport := freePort(t), freePort(t)
	s := &Server{Endpoint: fmt.Sprintf("%s://127.0.0.1:%d", scheme, cport), TLS: tc}
	peer := fmt.Sprintf("http://127.0.0.1:%d", pport)
	args := append([]string{
		"--name", "vigil-test", "--data-dir", t.TempDir(),
		"--listen-client-urls", s.Endpoint, "--advertise-client-urls", s.Endpoint,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "vigil-test=" + peer, "--log-level", "error", "--logger", "zap",
	}, extraArgs...)
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout = &lockedWriter{s: s}
	s.cmd.Stderr = &lockedWriter{s: s}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting etcd: %v", err)
	}
	t.Cleanup(func() { s.Kill() })
	cli := s.Client(t)
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(ctx, "/health")
		cancel()
		if err == nil {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd did not become ready in 20s: %v\n%s", err, s.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type lockedWriter struct{ s *Server }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.log.Write(p)
}

// Log returns what etcd printed.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.log.String()
}

// Client returns a client of the server, closed at the end of the test.
func (s *Server) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{s.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), TLS: s.TLS})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Pause stops the etcd process (SIGSTOP): clients time out as if it were
// unreachable. Resume continues it.
func (s *Server) Pause() error  { return s.cmd.Process.Signal(syscall.SIGSTOP) }
func (s *Server) Resume() error { return s.cmd.Process.Signal(syscall.SIGCONT) }

// Kill stops etcd for good.
func (s *Server) Kill() {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return
	}
	s.stopped = true
	s.mu.Unlock()
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}
