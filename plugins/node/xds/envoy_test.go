package xds

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	bootstrap "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3" // the README's HttpProtocolOptions
	"go.yaml.in/yaml/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/vigilcdn/vigil/plugins/node/edge"
	"github.com/vigilcdn/vigil/sdk/publication"
)

// validateDeep checks m and every message inside it, the typed
// configurations packed in Any included, against Envoy's API rules.
func validateDeep(t *testing.T, path string, m proto.Message) {
	t.Helper()
	for _, err := range deepErrors(path, m) {
		t.Error(err)
	}
}

func deepErrors(path string, m proto.Message) (errs []error) {
	if a, ok := m.(*anypb.Any); ok {
		inner, err := a.UnmarshalNew()
		if err != nil {
			return []error{fmt.Errorf("%s: %w", path, err)}
		}
		return deepErrors(path+"("+a.GetTypeUrl()+")", inner)
	}
	if v, ok := m.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
		}
	}
	m.ProtoReflect().Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Kind() != protoreflect.MessageKind {
			return true
		}
		p := path + "." + string(fd.Name())
		switch {
		case fd.IsList():
			for i := range v.List().Len() {
				errs = append(errs, deepErrors(p, v.List().Get(i).Message().Interface())...)
			}
		case fd.IsMap():
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					errs = append(errs, deepErrors(p, mv.Message().Interface())...)
				}
				return true
			})
		default:
			errs = append(errs, deepErrors(p, v.Message().Interface())...)
		}
		return true
	})
	return errs
}

// TestResourcesKeepEnvoysRules: every resource of a snapshot with an
// https origin, a ramp and two sites, and every typed configuration
// inside (the connection managers, the router, TLS), passes the rules of
// Envoy's API that Envoy checks on what it receives.
func TestResourcesKeepEnvoysRules(t *testing.T) {
	s, r := newTestServer(t)
	r.set("origin-c.example.net", "192.0.2.7")
	v, _ := edge.Build(&publication.Snapshot{Version: 1, Sites: []publication.Site{
		{Name: "www", Hostname: "www.example.com", Level: 1,
			Origins: []publication.Origin{{Name: "a1", Address: "http://10.0.1.1:8080", State: "healthy"}},
			Ramp:    &publication.Ramp{Weight: 10, From: 3, FromOrigins: []publication.Origin{{Name: "c1", Address: "https://origin-c.example.net", State: "healthy"}}}},
		{Name: "img", Hostname: "img.example.com", Level: 2,
			Origins: []publication.Origin{{Name: "b1", Address: "https://10.0.2.1", State: "unknown"}}},
	}}, topo, "cdn_", nil)
	if _, err := s.Apply(context.Background(), v); err != nil {
		t.Fatal(err)
	}
	n := 0
	for typ, rs := range s.last {
		for _, res := range rs {
			n++
			validateDeep(t, typ, res)
		}
	}
	if n != 2+2+3+1 { // clusters, assignments, listeners, route configuration
		t.Errorf("%d resources", n)
	}
	// The check sees inside an Any: a connection manager without a stat
	// prefix is refused.
	l := apiListener("www", DefaultRouteName)
	m, err := l.GetApiListener().GetApiListener().UnmarshalNew()
	if err != nil {
		t.Fatal(err)
	}
	m.(*hcm.HttpConnectionManager).StatPrefix = ""
	l.ApiListener.ApiListener = mustAny(m)
	if errs := deepErrors("broken", l); len(errs) != 1 || !strings.Contains(errs[0].Error(), "StatPrefix") {
		t.Errorf("a connection manager without stat prefix: %v", errs)
	}
}

// TestREADMEBootstrap: the Envoy bootstrap of the README is a valid
// Bootstrap by Envoy's API and points at the resources the Server
// serves: ADS for clusters, the route configuration DefaultRouteName.
func TestREADMEBootstrap(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "An Envoy bootstrap (`envoy -c envoy.yaml`)")
	if ok {
		_, rest, ok = strings.Cut(rest, "```yaml\n")
	}
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("the README has no Envoy bootstrap block")
	}
	var doc any
	if err := yaml.Unmarshal([]byte(block), &doc); err != nil {
		t.Fatalf("the bootstrap is not YAML: %v", err)
	}
	js, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var bs bootstrap.Bootstrap
	if err := protojson.Unmarshal(js, &bs); err != nil {
		t.Fatalf("the bootstrap is not an Envoy Bootstrap: %v", err)
	}
	validateDeep(t, "bootstrap", &bs)
	if bs.GetDynamicResources().GetCdsConfig().GetAds() == nil {
		t.Error("clusters do not come by ADS")
	}
	if got := bs.GetDynamicResources().GetAdsConfig().GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName(); got != "vigil_xds" {
		t.Errorf("ADS cluster %q", got)
	}
	js2, _ := protojson.Marshal(&bs)
	if !strings.Contains(string(js2), `"routeConfigName":"`+DefaultRouteName+`"`) {
		t.Errorf("the listener does not ask for route configuration %q: %s", DefaultRouteName, js2)
	}
}
