package xds

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	envoycore "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	router "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/vigilcdn/vigil/plugins/node/edge"
)

// overprovisioning is every ClusterLoadAssignment's overprovisioning
// factor, in per cent: so large that a priority (or a ramp's locality)
// keeps all its traffic while any of its origins is not unhealthy, as
// vigil's own proxy and HAProxy's backup servers do. Envoy's default
// (140) would send part of the traffic to the next level as soon as a
// third of the current level's origins are unhealthy.
const overprovisioning = 100000

// consecutive5xx is the 5xx answers in a row after which Envoy ejects an
// origin.
const consecutive5xx = 3

// tlsMatch is the transport_socket_matches entry (and the endpoint
// metadata it matches) of https origins.
const tlsMatch = "tls"

// resolved is an origin's addresses, from its host (an IP, or a name
// looked up by the Server).
type resolved func(o edge.Origin) []netip.Addr

// resources is the xDS resources of v: by type, the listeners (one gRPC
// API listener per site, named after it, and Envoy's HTTP listener), the
// route configuration, one cluster and one ClusterLoadAssignment per
// site.
func resources(v *edge.View, opts Options, addrs resolved) map[resource.Type][]types.Resource {
	out := map[resource.Type][]types.Resource{
		resource.ClusterType:  {},
		resource.EndpointType: {},
		resource.ListenerType: {},
		resource.RouteType:    {},
	}
	rc := &route.RouteConfiguration{Name: opts.RouteName}
	domains := map[string]bool{}
	for _, s := range v.Sites {
		out[resource.ClusterType] = append(out[resource.ClusterType], siteCluster(s, opts))
		out[resource.EndpointType] = append(out[resource.EndpointType], loadAssignment(s, addrs))
		if s.Name != opts.ListenerName {
			out[resource.ListenerType] = append(out[resource.ListenerType], apiListener(s.Name, opts.RouteName))
		}
		vh := &route.VirtualHost{Name: s.Name, Routes: []*route.Route{{
			Match:  &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
			Action: &route.Route_Route{Route: &route.RouteAction{ClusterSpecifier: &route.RouteAction_Cluster{Cluster: s.Backend}}},
		}}}
		// Envoy refuses a domain in two virtual hosts: the first site (by
		// name) keeps it.
		for _, d := range []string{s.Hostname, s.Name} {
			if d != "" && !domains[d] {
				domains[d] = true
				vh.Domains = append(vh.Domains, d)
			}
		}
		if len(vh.Domains) > 0 {
			rc.VirtualHosts = append(rc.VirtualHosts, vh)
		}
	}
	if len(v.Sites) > 0 {
		// With the listener that refers to it: every route configuration
		// of a snapshot is referred to (Snapshot.Consistent).
		out[resource.RouteType] = append(out[resource.RouteType], rc)
		out[resource.ListenerType] = append(out[resource.ListenerType], httpListener(opts))
	}
	return out
}

// httpListener is the listener an Envoy that asks for listeners by LDS
// gets: HTTP on opts.HTTPListen, routed by the route configuration.
func httpListener(opts Options) *listener.Listener {
	m := &hcm.HttpConnectionManager{
		StatPrefix:     "vigil",
		StripPortMode:  &hcm.HttpConnectionManager_StripAnyHostPort{StripAnyHostPort: true},
		RouteSpecifier: &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{ConfigSource: ads(), RouteConfigName: opts.RouteName}},
		HttpFilters:    []*hcm.HttpFilter{routerFilter()},
	}
	return &listener.Listener{
		Name: opts.ListenerName,
		Address: &envoycore.Address{Address: &envoycore.Address_SocketAddress{SocketAddress: &envoycore.SocketAddress{
			Address: opts.httpHost, PortSpecifier: &envoycore.SocketAddress_PortValue{PortValue: opts.httpPort}}}},
		FilterChains: []*listener.FilterChain{{Filters: []*listener.Filter{{Name: "envoy.filters.network.http_connection_manager",
			ConfigType: &listener.Filter_TypedConfig{TypedConfig: mustAny(m)}}}}},
	}
}

func routerFilter() *hcm.HttpFilter {
	return &hcm.HttpFilter{Name: "envoy.filters.http.router",
		ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: mustAny(&router.Router{})}}
}

// ads is the config source of every resource: the stream they came on.
func ads() *envoycore.ConfigSource {
	return &envoycore.ConfigSource{ResourceApiVersion: envoycore.ApiVersion_V3,
		ConfigSourceSpecifier: &envoycore.ConfigSource_Ads{Ads: &envoycore.AggregatedConfigSource{}}}
}

// siteCluster is s's EDS cluster: round-robin, locality weights on (the
// ramps), https origins (endpoints matched by their metadata) over TLS
// with the site's hostname as SNI and checked against it.
func siteCluster(s edge.Site, opts Options) *cluster.Cluster {
	c := &cluster.Cluster{
		Name:                 s.Backend,
		ClusterDiscoveryType: &cluster.Cluster_Type{Type: cluster.Cluster_EDS},
		EdsClusterConfig:     &cluster.Cluster_EdsClusterConfig{EdsConfig: ads(), ServiceName: s.Backend},
		ConnectTimeout:       durationpb.New(opts.ConnectTimeout),
		LbPolicy:             cluster.Cluster_ROUND_ROBIN,
		CommonLbConfig: &cluster.Cluster_CommonLbConfig{LocalityConfigSpecifier: &cluster.Cluster_CommonLbConfig_LocalityWeightedLbConfig_{
			LocalityWeightedLbConfig: &cluster.Cluster_CommonLbConfig_LocalityWeightedLbConfig{}}},
		// Envoy's own judgement between two of vigil's rounds: an origin
		// that answers consecutive 5xx (or whose connections fail) is
		// ejected, the whole level if need be, and an ejected origin
		// counts as unhealthy, so that the next priority (the backup
		// level) serves until vigil switches, as HAProxy's backup servers
		// do. gRPC clients ignore consecutive_5xx.
		OutlierDetection: &cluster.OutlierDetection{
			Consecutive_5Xx:    wrapperspb.UInt32(consecutive5xx),
			MaxEjectionPercent: wrapperspb.UInt32(100),
		},
	}
	if anyTLS(s) {
		ctx := &tlsv3.UpstreamTlsContext{Sni: s.Hostname, CommonTlsContext: &tlsv3.CommonTlsContext{
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
				TrustedCa: &envoycore.DataSource{Specifier: &envoycore.DataSource_Filename{Filename: opts.TrustedCA}},
				MatchTypedSubjectAltNames: []*tlsv3.SubjectAltNameMatcher{{SanType: tlsv3.SubjectAltNameMatcher_DNS,
					Matcher: &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: s.Hostname}}}},
			}}}}
		c.TransportSocketMatches = []*cluster.Cluster_TransportSocketMatch{{
			Name:            tlsMatch,
			Match:           mustStruct(map[string]any{tlsMatch: true}),
			TransportSocket: &envoycore.TransportSocket{Name: "envoy.transport_sockets.tls", ConfigType: &envoycore.TransportSocket_TypedConfig{TypedConfig: mustAny(ctx)}},
		}}
	}
	return c
}

// anyTLS tells whether an origin of s that is served, at any level, is
// https (View.Site.Scheme looks at the current level and ramp only).
func anyTLS(s edge.Site) bool {
	tls := func(o edge.Origin) bool { return o.TLS }
	if slices.ContainsFunc(s.Origins, tls) || slices.ContainsFunc(s.Others, tls) {
		return true
	}
	return s.Ramp != nil && slices.ContainsFunc(s.Ramp.Origins, tls)
}

// group is the origins of one level that go in one locality.
type group struct {
	level   int
	weight  uint32
	origins []edge.Origin
}

// priorities orders s's levels: the current level first (with, during a
// ramp, the level being left beside it in the same priority, the
// localities weighted by the ramp), then the backup level, then the
// other known levels by number. Levels without origins are left out, so
// that the priorities have no gap.
func priorities(s edge.Site) [][]group {
	var out [][]group
	first := []group{{level: s.Level, weight: 1, origins: s.Origins}}
	if r := s.Ramp; r != nil {
		first[0].weight = uint32(r.Weight)
		first = append(first, group{level: r.From, weight: uint32(r.FromWeight), origins: r.Origins})
	}
	first = slices.DeleteFunc(first, func(g group) bool { return len(g.origins) == 0 })
	if len(first) > 0 {
		out = append(out, first)
	}
	var levels []int
	if len(s.Backup) > 0 {
		levels = append(levels, s.Backup[0].Level)
	}
	byLevel := map[int][]edge.Origin{}
	for _, o := range s.Others {
		if len(byLevel[o.Level]) == 0 && !slices.Contains(levels, o.Level) {
			levels = append(levels, o.Level)
		}
		byLevel[o.Level] = append(byLevel[o.Level], o)
	}
	for _, l := range levels {
		if len(byLevel[l]) > 0 {
			out = append(out, []group{{level: l, weight: 1, origins: byLevel[l]}})
		}
	}
	return out
}

// loadAssignment is s's ClusterLoadAssignment: one locality per level
// and priority, an LbEndpoint per origin address with vigil's verdict as
// its health status. An address already given (two origins on one
// address) is given once, at its first place.
func loadAssignment(s edge.Site, addrs resolved) *endpoint.ClusterLoadAssignment {
	cla := &endpoint.ClusterLoadAssignment{ClusterName: s.Backend,
		Policy: &endpoint.ClusterLoadAssignment_Policy{OverprovisioningFactor: wrapperspb.UInt32(overprovisioning)}}
	seen := map[string]bool{}
	for p, groups := range priorities(s) {
		for _, g := range groups {
			loc := &endpoint.LocalityLbEndpoints{
				Locality:            &envoycore.Locality{Region: "vigil", Zone: "level-" + strconv.Itoa(g.level)},
				Priority:            uint32(p),
				LoadBalancingWeight: wrapperspb.UInt32(g.weight),
			}
			for _, o := range g.origins {
				port, err := strconv.ParseUint(o.Port, 10, 16)
				if err != nil {
					continue // edge.Build gives a number
				}
				for _, a := range addrs(o) {
					hp := netip.AddrPortFrom(a, uint16(port)).String()
					if seen[hp] {
						continue
					}
					seen[hp] = true
					loc.LbEndpoints = append(loc.LbEndpoints, lbEndpoint(o, a, uint32(port)))
				}
			}
			if len(loc.LbEndpoints) > 0 {
				cla.Endpoints = append(cla.Endpoints, loc)
			}
		}
	}
	// A priority left empty (its origins' names did not resolve) would
	// leave a gap, which gRPC refuses: number them again.
	p, last := uint32(0), uint32(0)
	for i, loc := range cla.Endpoints {
		if i > 0 && loc.Priority != last {
			p++
		}
		last = loc.Priority
		loc.Priority = p
	}
	return cla
}

// lbEndpoint is origin o at address a.
func lbEndpoint(o edge.Origin, a netip.Addr, port uint32) *endpoint.LbEndpoint {
	ep := &endpoint.Endpoint{Address: &envoycore.Address{Address: &envoycore.Address_SocketAddress{SocketAddress: &envoycore.SocketAddress{
		Address: a.Unmap().String(), PortSpecifier: &envoycore.SocketAddress_PortValue{PortValue: port}}}}}
	if _, err := netip.ParseAddr(o.Host); err != nil {
		ep.Hostname = o.Host
	}
	md := map[string]*structpb.Struct{"vigil": mustStruct(map[string]any{"origin": o.Name, "level": float64(o.Level)})}
	if o.TLS {
		md["envoy.transport_socket_match"] = mustStruct(map[string]any{tlsMatch: true})
	}
	return &endpoint.LbEndpoint{
		HostIdentifier: &endpoint.LbEndpoint_Endpoint{Endpoint: ep},
		HealthStatus:   healthStatus(o.State),
		Metadata:       &envoycore.Metadata{FilterMetadata: md},
	}
}

// healthStatus is vigil's verdict as xDS says it.
func healthStatus(state string) envoycore.HealthStatus {
	switch state {
	case "healthy":
		return envoycore.HealthStatus_HEALTHY
	case "unhealthy":
		return envoycore.HealthStatus_UNHEALTHY
	default:
		return envoycore.HealthStatus_UNKNOWN
	}
}

// apiListener is the gRPC API listener of site name (the target
// xds:///NAME), routed by the route configuration routeName.
func apiListener(name, routeName string) *listener.Listener {
	m := &hcm.HttpConnectionManager{
		StatPrefix:     "vigil",
		RouteSpecifier: &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{ConfigSource: ads(), RouteConfigName: routeName}},
		HttpFilters:    []*hcm.HttpFilter{routerFilter()},
	}
	return &listener.Listener{Name: name, ApiListener: &listener.ApiListener{ApiListener: mustAny(m)}}
}

func mustAny(m proto.Message) *anypb.Any {
	a, err := anypb.New(m)
	if err != nil {
		panic(fmt.Sprintf("xds: %v", err)) // only for messages of this package
	}
	return a
}

func mustStruct(m map[string]any) *structpb.Struct {
	s, err := structpb.NewStruct(m)
	if err != nil {
		panic(fmt.Sprintf("xds: %v", err)) // only for literals of this package
	}
	return s
}
