package xds

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	envoycore "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	endpointservice "github.com/envoyproxy/go-control-plane/envoy/service/endpoint/v3"
	listenerservice "github.com/envoyproxy/go-control-plane/envoy/service/listener/v3"
	routeservice "github.com/envoyproxy/go-control-plane/envoy/service/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	cplog "github.com/envoyproxy/go-control-plane/pkg/log"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/hashicorp/go-hclog"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/protobuf/proto"

	"github.com/vigilcdn/vigil/plugins/node/edge"
)

// Defaults of Options.
const (
	// DefaultRouteName is the route configuration Envoy's listener asks
	// for by RDS.
	DefaultRouteName = "vigil"
	// DefaultListenerName names Envoy's HTTP listener (LDS): a name no
	// site can have, gRPC clients ask for their site's name.
	DefaultListenerName = "vigil/http"
	// DefaultHTTPListen is the address of Envoy's HTTP listener (LDS).
	DefaultHTTPListen = "0.0.0.0:10000"
	// DefaultConnectTimeout is every cluster's connect_timeout.
	DefaultConnectTimeout = 5 * time.Second
	// DefaultTrustedCA is the CA bundle Envoy checks https origins
	// against (Debian's system bundle): a path on Envoy's machine.
	DefaultTrustedCA = "/etc/ssl/certs/ca-certificates.crt"
	// DefaultLookupTimeout bounds the look-ups of one Apply.
	DefaultLookupTimeout = 5 * time.Second
)

// lookups is how many origin names are looked up at once.
const lookups = 16

// nodeKey is the one snapshot every xDS client gets.
const nodeKey = "vigil"

// Resolver looks up an origin's host name; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configure a Server.
type Options struct {
	// Listen is the host:port the xDS gRPC service listens on (plain
	// text: keep it on loopback or a private network, see doc.go).
	Listen string
	// RouteName names the route configuration served by RDS (default
	// DefaultRouteName).
	RouteName string
	// ListenerName names the HTTP listener served by LDS (default
	// DefaultListenerName); HTTPListen is its address, host:port on
	// Envoy's machine (default DefaultHTTPListen). An Envoy whose
	// listeners are static ignores it.
	ListenerName, HTTPListen string
	httpHost                 string
	httpPort                 uint32
	// ConnectTimeout is every cluster's connect_timeout (default
	// DefaultConnectTimeout).
	ConnectTimeout time.Duration
	// TrustedCA is the file, on Envoy's machine, of the CAs that https
	// origins are checked against (default DefaultTrustedCA).
	TrustedCA string
	// Resolver looks up origins whose host is a name (default
	// net.DefaultResolver); LookupTimeout bounds one Apply's look-ups
	// (default DefaultLookupTimeout).
	Resolver      Resolver
	LookupTimeout time.Duration
	// Log receives what happens (default: nothing).
	Log hclog.Logger
}

// Server serves the publication to xDS clients. It is an edge.Driver
// (Apply turns a View into a new snapshot) and an edge.Watcher whose
// Watch is the gRPC service's lifetime: the Hub that runs it serves xDS
// for as long as it runs.
type Server struct {
	opts   Options
	lis    net.Listener
	grpc   *grpc.Server
	cache  cache.SnapshotCache
	cancel context.CancelFunc

	mu      sync.Mutex
	last    map[resource.Type][]types.Resource
	lastPub uint64
	seq     uint64
	version string
	// names are the last good look-ups, kept while a name fails.
	names map[string][]netip.Addr
	// failing are the names whose failure was logged.
	failing map[string]bool
}

// allNodes gives every client the same snapshot.
type allNodes struct{}

func (allNodes) ID(*envoycore.Node) string { return nodeKey }

// New listens on opts.Listen and returns the Server; Watch serves.
func New(opts Options) (*Server, error) {
	if opts.Listen == "" {
		return nil, errors.New("xds: no listen address: give host:port, e.g. 127.0.0.1:18000")
	}
	if opts.RouteName == "" {
		opts.RouteName = DefaultRouteName
	}
	if opts.ListenerName == "" {
		opts.ListenerName = DefaultListenerName
	}
	if opts.HTTPListen == "" {
		opts.HTTPListen = DefaultHTTPListen
	}
	ap, err := netip.ParseAddrPort(opts.HTTPListen)
	if err != nil || ap.Port() == 0 {
		return nil, fmt.Errorf("xds: Envoy's HTTP listener %q: give an IP and a port, e.g. 0.0.0.0:10000", opts.HTTPListen)
	}
	opts.httpHost, opts.httpPort = ap.Addr().String(), uint32(ap.Port())
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.TrustedCA == "" {
		opts.TrustedCA = DefaultTrustedCA
	}
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	if opts.LookupTimeout <= 0 {
		opts.LookupTimeout = DefaultLookupTimeout
	}
	if opts.Log == nil {
		opts.Log = hclog.NewNullLogger()
	}
	lis, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("xds: listening on %s: %w (give a free host:port, e.g. 127.0.0.1:18000)", opts.Listen, err)
	}
	if ap, err := netip.ParseAddrPort(lis.Addr().String()); err == nil && !ap.Addr().IsLoopback() {
		opts.Log.Warn("the xDS service has no authentication: it serves every origin's address to whoever connects; keep it on loopback or a private network", "listen", lis.Addr().String())
	}
	s := &Server{opts: opts, lis: lis, names: map[string][]netip.Addr{}, failing: map[string]bool{}}
	lg := opts.Log
	s.cache = cache.NewSnapshotCache(false, allNodes{}, cplog.LoggerFuncs{
		WarnFunc:  func(f string, a ...any) { lg.Warn(fmt.Sprintf(f, a...)) },
		ErrorFunc: func(f string, a ...any) { lg.Error(fmt.Sprintf(f, a...)) },
	})
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	xs := server.NewServer(ctx, s.cache, server.CallbackFuncs{
		StreamOpenFunc: func(_ context.Context, id int64, typ string) error {
			lg.Debug("xDS stream opened", "stream", id, "type", typ)
			return nil
		},
		StreamRequestFunc: func(id int64, req *discovery.DiscoveryRequest) error {
			if d := req.GetErrorDetail(); d != nil {
				lg.Warn("an xDS client refused the resources (NACK); it keeps its previous ones", "stream", id,
					"node", req.GetNode().GetId(), "type", req.GetTypeUrl(), "nonce", req.GetResponseNonce(), "error", d.GetMessage())
			}
			return nil
		},
	})
	s.grpc = grpc.NewServer(
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	)
	discovery.RegisterAggregatedDiscoveryServiceServer(s.grpc, xs)
	clusterservice.RegisterClusterDiscoveryServiceServer(s.grpc, xs)
	endpointservice.RegisterEndpointDiscoveryServiceServer(s.grpc, xs)
	listenerservice.RegisterListenerDiscoveryServiceServer(s.grpc, xs)
	routeservice.RegisterRouteDiscoveryServiceServer(s.grpc, xs)
	return s, nil
}

// Name names the edge in logs and metrics.
func (s *Server) Name() string { return "xds" }

// Addr is the address the xDS service listens on.
func (s *Server) Addr() net.Addr { return s.lis.Addr() }

// Version is the version of the snapshot served ("" before the first
// Apply): the publication version and a sequence number, "7.3".
func (s *Server) Version() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// Watch serves xDS until ctx ends, then stops the service (clients keep
// what they have). changed is never called: a client that connects again
// gets the snapshot from the cache.
func (s *Server) Watch(ctx context.Context, _ func()) {
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			s.Close()
		case <-done:
		}
	}()
	err := s.grpc.Serve(s.lis)
	close(done)
	if err != nil && ctx.Err() == nil {
		s.opts.Log.Error("the xDS service stopped", "error", err)
	}
}

// Close stops the service and closes its listener (it is also what
// Watch does when its context ends).
func (s *Server) Close() {
	s.cancel()
	s.grpc.Stop()
}

// Apply serves v: a new snapshot when v's publication version or the
// resources it makes differ from the last one.
func (s *Server) Apply(ctx context.Context, v *edge.View) (edge.Result, error) {
	addrs := s.lookup(ctx, v)
	res := resources(v, s.opts, func(o edge.Origin) []netip.Addr {
		if a, err := netip.ParseAddr(o.Host); err == nil {
			return []netip.Addr{a}
		}
		return addrs[o.Host]
	})
	if err := validate(res); err != nil {
		return edge.Result{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last != nil && s.lastPub == v.Version && sameResources(s.last, res) {
		return edge.Result{}, nil
	}
	version := fmt.Sprintf("%d.%d", v.Version, s.seq+1)
	snap, err := cache.NewSnapshot(version, res)
	if err != nil {
		return edge.Result{}, fmt.Errorf("xds: snapshot %s: %w", version, err)
	}
	if err := snap.Consistent(); err != nil {
		return edge.Result{}, fmt.Errorf("xds: snapshot %s is not consistent: %w", version, err)
	}
	if err := s.cache.SetSnapshot(ctx, nodeKey, snap); err != nil {
		return edge.Result{}, fmt.Errorf("xds: snapshot %s: %w", version, err)
	}
	s.seq++
	s.last, s.lastPub, s.version = res, v.Version, version
	return edge.Result{Changes: 1}, nil
}

// lookup resolves the origin hosts of v that are names, at most lookups
// at once and within LookupTimeout. A name that fails keeps its last
// good addresses (logged once until it resolves again); one that never
// resolved is left out of the endpoints.
func (s *Server) lookup(ctx context.Context, v *edge.View) map[string][]netip.Addr {
	var hosts []string
	add := func(os []edge.Origin) {
		for _, o := range os {
			if _, err := netip.ParseAddr(o.Host); err != nil && !slices.Contains(hosts, o.Host) {
				hosts = append(hosts, o.Host)
			}
		}
	}
	for _, site := range v.Sites {
		add(site.Origins)
		add(site.Others)
		if site.Ramp != nil {
			add(site.Ramp.Origins)
		}
	}
	out := make(map[string][]netip.Addr, len(hosts))
	if len(hosts) == 0 {
		return out
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.LookupTimeout)
	defer cancel()
	var mu sync.Mutex
	var g errgroup.Group
	g.SetLimit(lookups)
	for _, h := range hosts {
		g.Go(func() error {
			a, err := s.opts.Resolver.LookupNetIP(ctx, "ip", h)
			slices.SortFunc(a, func(x, y netip.Addr) int { return x.Compare(y) })
			a = slices.Compact(a)
			mu.Lock()
			defer mu.Unlock()
			s.mu.Lock()
			defer s.mu.Unlock()
			if err != nil || len(a) == 0 {
				if err == nil {
					err = errors.New("no address")
				}
				if !s.failing[h] {
					s.failing[h] = true
					if old := s.names[h]; len(old) > 0 {
						s.opts.Log.Warn("an origin's host does not resolve: its last addresses stay in xDS", "host", h, "error", err)
					} else {
						s.opts.Log.Warn("an origin's host does not resolve: left out of xDS until it does", "host", h, "error", err)
					}
				}
				out[h] = s.names[h]
				return nil
			}
			if s.failing[h] {
				delete(s.failing, h)
				s.opts.Log.Info("an origin's host resolves again", "host", h)
			}
			s.names[h] = a
			out[h] = a
			return nil
		})
	}
	_ = g.Wait() // the goroutines return no error
	return out
}

// validate checks every resource against the constraints of Envoy's API
// (the protoc-gen-validate rules Envoy checks too), so that a resource
// Envoy would refuse is never served. The typed configurations inside
// (the connection manager, TLS) are checked by the tests.
func validate(res map[resource.Type][]types.Resource) error {
	for typ, rs := range res {
		for _, r := range rs {
			v, ok := r.(interface{ ValidateAll() error })
			if !ok {
				continue
			}
			if err := v.ValidateAll(); err != nil {
				return fmt.Errorf("xds: %s %q breaks Envoy's API: %w", typ, cache.GetResourceName(r), err)
			}
		}
	}
	return nil
}

// sameResources tells whether a and b hold equal resources in the same
// order.
func sameResources(a, b map[resource.Type][]types.Resource) bool {
	if len(a) != len(b) {
		return false
	}
	for t, as := range a {
		bs, ok := b[t]
		if !ok || len(as) != len(bs) {
			return false
		}
		for i := range as {
			if !proto.Equal(as[i], bs[i]) {
				return false
			}
		}
	}
	return true
}
