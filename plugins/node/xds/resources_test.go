package xds

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// fakeResolver answers from a table; a name it lacks fails.
type fakeResolver struct {
	mu    sync.Mutex
	addrs map[string][]netip.Addr
	asked int
}

func (r *fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked++
	if a, ok := r.addrs[host]; ok {
		return a, nil
	}
	return nil, errors.New("no such host")
}

func (r *fakeResolver) set(host string, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(addrs) == 0 {
		delete(r.addrs, host)
		return
	}
	r.addrs[host] = nil
	for _, a := range addrs {
		r.addrs[host] = append(r.addrs[host], netip.MustParseAddr(a))
	}
}

func newTestServer(t *testing.T) (*Server, *fakeResolver) {
	t.Helper()
	r := &fakeResolver{addrs: map[string][]netip.Addr{}}
	s, err := New(Options{Listen: "127.0.0.1:0", Resolver: r})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, r
}

// topo is the levels of site www: a (level 1), b (level 2), c (level 3).
var topo = edge.Topology{"www": {
	{Name: "a1", Address: "http://10.0.1.1:8080", State: "healthy", Level: 1},
	{Name: "a2", Address: "http://10.0.1.2:8080", State: "unhealthy", Level: 1},
	{Name: "b1", Address: "http://10.0.2.1", State: "healthy", Level: 2},
	{Name: "c1", Address: "https://origin-c.example.net", State: "unknown", Level: 3},
}}

func view(t *testing.T, version uint64, level int, ramp *publication.Ramp) *edge.View {
	t.Helper()
	var origins []publication.Origin
	for _, o := range topo["www"] {
		if o.Level == level {
			origins = append(origins, publication.Origin{Name: o.Name, Address: o.Address, State: o.State})
		}
	}
	v, skipped := edge.Build(&publication.Snapshot{Version: version, Sites: []publication.Site{
		{Name: "www", Hostname: "www.example.com", Level: level, Origins: origins, Ramp: ramp},
	}}, topo, "", nil)
	if len(skipped) > 0 {
		t.Fatalf("skipped %v", skipped)
	}
	return v
}

// summary is a ClusterLoadAssignment as "priority/level@weight: addr
// STATUS, ..." lines.
func summary(cla *endpoint.ClusterLoadAssignment) []string {
	var out []string
	for _, loc := range cla.GetEndpoints() {
		var eps []string
		for _, ep := range loc.GetLbEndpoints() {
			sa := ep.GetEndpoint().GetAddress().GetSocketAddress()
			eps = append(eps, fmt.Sprintf("%s:%d %s", sa.GetAddress(), sa.GetPortValue(), ep.GetHealthStatus()))
		}
		out = append(out, fmt.Sprintf("p%d/%s@%d: %s", loc.GetPriority(), loc.GetLocality().GetZone(), loc.GetLoadBalancingWeight().GetValue(), strings.Join(eps, ", ")))
	}
	return out
}

func only[T types.Resource](t *testing.T, s *Server, typ resource.Type) T {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := s.last[typ]
	if len(rs) != 1 {
		t.Fatalf("%d resources of %s, want 1", len(rs), typ)
	}
	return rs[0].(T)
}

// TestLevelsAsPriorities: the current level is priority 0, the backup
// level next, then the others; vigil's verdicts are the health statuses;
// a ramp puts the level being left beside the current one in priority 0,
// the localities weighted by the ramp; names are looked up.
func TestLevelsAsPriorities(t *testing.T) {
	for _, tc := range []struct {
		name  string
		level int
		ramp  *publication.Ramp
		want  []string
	}{
		{"level 1", 1, nil, []string{
			"p0/level-1@1: 10.0.1.1:8080 HEALTHY, 10.0.1.2:8080 UNHEALTHY",
			"p1/level-2@1: 10.0.2.1:80 HEALTHY",
			"p2/level-3@1: 192.0.2.7:443 UNKNOWN, 192.0.2.8:443 UNKNOWN",
		}},
		{"failed over to level 2", 2, nil, []string{
			"p0/level-2@1: 10.0.2.1:80 HEALTHY",
			"p1/level-3@1: 192.0.2.7:443 UNKNOWN, 192.0.2.8:443 UNKNOWN",
			"p2/level-1@1: 10.0.1.1:8080 HEALTHY, 10.0.1.2:8080 UNHEALTHY",
		}},
		{"on the last level", 3, nil, []string{
			"p0/level-3@1: 192.0.2.7:443 UNKNOWN, 192.0.2.8:443 UNKNOWN",
			"p1/level-2@1: 10.0.2.1:80 HEALTHY",
			"p2/level-1@1: 10.0.1.1:8080 HEALTHY, 10.0.1.2:8080 UNHEALTHY",
		}},
		{"ramp from 2 back to 1", 1, &publication.Ramp{Weight: 25, From: 2, FromOrigins: []publication.Origin{{Name: "b1", Address: "http://10.0.2.1", State: "healthy"}}}, []string{
			"p0/level-1@25: 10.0.1.1:8080 HEALTHY, 10.0.1.2:8080 UNHEALTHY",
			"p0/level-2@75: 10.0.2.1:80 HEALTHY",
			"p1/level-3@1: 192.0.2.7:443 UNKNOWN, 192.0.2.8:443 UNKNOWN",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, r := newTestServer(t)
			r.set("origin-c.example.net", "192.0.2.8", "192.0.2.7")
			if _, err := s.Apply(context.Background(), view(t, 1, tc.level, tc.ramp)); err != nil {
				t.Fatal(err)
			}
			cla := only[*endpoint.ClusterLoadAssignment](t, s, resource.EndpointType)
			if got := summary(cla); !slices.Equal(got, tc.want) {
				t.Errorf("endpoints:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if cla.GetClusterName() != "www" || cla.GetPolicy().GetOverprovisioningFactor().GetValue() != overprovisioning {
				t.Errorf("cluster %q, overprovisioning %v", cla.GetClusterName(), cla.GetPolicy().GetOverprovisioningFactor())
			}
			c := only[*cluster.Cluster](t, s, resource.ClusterType)
			if c.GetName() != "www" || c.GetType() != cluster.Cluster_EDS || c.GetCommonLbConfig().GetLocalityWeightedLbConfig() == nil ||
				c.GetOutlierDetection().GetMaxEjectionPercent().GetValue() != 100 {
				t.Errorf("cluster: %v", c)
			}
			// c1 is https: the cluster has the TLS match, c1's endpoints
			// carry it.
			if m := c.GetTransportSocketMatches(); len(m) != 1 || m[0].GetName() != tlsMatch {
				t.Errorf("transport socket matches: %v", m)
			}
			for _, loc := range cla.GetEndpoints() {
				for _, ep := range loc.GetLbEndpoints() {
					https := ep.GetEndpoint().GetAddress().GetSocketAddress().GetPortValue() == 443
					_, matched := ep.GetMetadata().GetFilterMetadata()["envoy.transport_socket_match"]
					if https != matched {
						t.Errorf("endpoint %v: TLS match %v", ep.GetEndpoint().GetAddress(), matched)
					}
					if https && ep.GetEndpoint().GetHostname() != "origin-c.example.net" {
						t.Errorf("endpoint %v: hostname %q", ep.GetEndpoint().GetAddress(), ep.GetEndpoint().GetHostname())
					}
				}
			}
			rc := only[*route.RouteConfiguration](t, s, resource.RouteType)
			if vh := rc.GetVirtualHosts(); len(vh) != 1 || !slices.Equal(vh[0].GetDomains(), []string{"www.example.com", "www"}) ||
				vh[0].GetRoutes()[0].GetRoute().GetCluster() != "www" {
				t.Errorf("routes: %v", rc)
			}
		})
	}
}

// TestVersions: the same View applied again makes no new snapshot; a new
// publication version does, and so does a change within one version (the
// topology, a name's addresses). A name that stops resolving keeps its
// last addresses; one that never resolved is left out, the priorities
// without a gap.
func TestVersions(t *testing.T) {
	s, r := newTestServer(t)
	ctx := context.Background()
	apply := func(v *edge.View, wantChanges int, wantVersion string) {
		t.Helper()
		res, err := s.Apply(ctx, v)
		if err != nil {
			t.Fatal(err)
		}
		if res.Changes != wantChanges || s.Version() != wantVersion {
			t.Fatalf("changes %d, version %q; want %d, %q", res.Changes, s.Version(), wantChanges, wantVersion)
		}
	}
	if s.Version() != "" {
		t.Fatalf("version %q before any Apply", s.Version())
	}
	// origin-c does not resolve: level 3 has no endpoint.
	apply(view(t, 1, 1, nil), 1, "1.1")
	cla := only[*endpoint.ClusterLoadAssignment](t, s, resource.EndpointType)
	if got := summary(cla); len(got) != 2 {
		t.Fatalf("endpoints without level 3: %v", got)
	}
	apply(view(t, 1, 1, nil), 0, "1.1")
	r.set("origin-c.example.net", "192.0.2.7")
	apply(view(t, 1, 1, nil), 1, "1.2")
	apply(view(t, 2, 1, nil), 1, "2.3")
	// The name fails: its last address stays.
	r.set("origin-c.example.net")
	apply(view(t, 2, 1, nil), 0, "2.3")
	// Failed over to 3: level 3 first, with the kept address.
	apply(view(t, 3, 3, nil), 1, "3.4")
	cla = only[*endpoint.ClusterLoadAssignment](t, s, resource.EndpointType)
	if got := summary(cla); got[0] != "p0/level-3@1: 192.0.2.7:443 UNKNOWN" {
		t.Fatalf("endpoints: %v", got)
	}

	// A server that never resolved the name, on level 3: level 3 is left
	// out, the others numbered from 0.
	s2, _ := newTestServer(t)
	if _, err := s2.Apply(ctx, view(t, 3, 3, nil)); err != nil {
		t.Fatal(err)
	}
	want := []string{"p0/level-2@1: 10.0.2.1:80 HEALTHY", "p1/level-1@1: 10.0.1.1:8080 HEALTHY, 10.0.1.2:8080 UNHEALTHY"}
	if got := summary(only[*endpoint.ClusterLoadAssignment](t, s2, resource.EndpointType)); !slices.Equal(got, want) {
		t.Errorf("endpoints: %v, want %v", got, want)
	}
}

// TestNoSites: a publication without sites is a consistent, empty
// snapshot (no listener refers to a route configuration then).
func TestNoSites(t *testing.T) {
	s, _ := newTestServer(t)
	if _, err := s.Apply(context.Background(), &edge.View{Version: 9}); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for typ, rs := range s.last {
		if len(rs) != 0 {
			t.Errorf("%d resources of %s", len(rs), typ)
		}
	}
}

// TestSharedAddress: two origins on one address (two levels, or two
// names of one host) give one endpoint, where it first appears: gRPC
// refuses an address twice in a cluster.
func TestSharedAddress(t *testing.T) {
	s, _ := newTestServer(t)
	v, _ := edge.Build(&publication.Snapshot{Version: 1, Sites: []publication.Site{{Name: "www", Hostname: "www.example.com", Level: 1,
		Origins: []publication.Origin{{Name: "a", Address: "http://10.0.0.1", State: "healthy"}},
		Backup:  &publication.Backup{Level: 2, Origins: []publication.Origin{{Name: "b", Address: "http://10.0.0.1:80", State: "healthy"}, {Name: "c", Address: "http://10.0.0.2", State: "healthy"}}}}}}, nil, "", nil)
	if _, err := s.Apply(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	want := []string{"p0/level-1@1: 10.0.0.1:80 HEALTHY", "p1/level-2@1: 10.0.0.2:80 HEALTHY"}
	if got := summary(only[*endpoint.ClusterLoadAssignment](t, s, resource.EndpointType)); !slices.Equal(got, want) {
		t.Errorf("endpoints: %v, want %v", got, want)
	}
}

// TestNewErrors: bad addresses are refused with what to give.
func TestNewErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no listen", Options{}, "no listen address: give host:port"},
		{"bad listen", Options{Listen: "127.0.0.1:x"}, "listening on 127.0.0.1:x"},
		{"http listener not an IP", Options{Listen: "127.0.0.1:0", HTTPListen: "localhost:80"}, "give an IP and a port"},
		{"http listener without port", Options{Listen: "127.0.0.1:0", HTTPListen: "0.0.0.0:0"}, "give an IP and a port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(tc.opts)
			if err == nil {
				s.Close()
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to say %q", err, tc.want)
			}
		})
	}
}
