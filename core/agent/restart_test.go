package agent

import (
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/config"
)

func TestNeedRestart(t *testing.T) {
	base := func() *config.Config {
		return &config.Config{Control: config.Control{DataDir: "/var/lib/vigil", API: config.API{Listen: "127.0.0.1:8470"}}}
	}
	etcd := func(advertise, id string) func(c *config.Config) {
		return func(c *config.Config) {
			c.Control.Store = &config.EtcdStore{Endpoints: []string{"127.0.0.1:2379"}, Advertise: advertise, ID: id}
		}
	}
	tests := []struct {
		name      string
		old, next []func(c *config.Config)
		want      []string // a substring of each named setting, in order
	}{
		{"nothing changed", nil, nil, nil},
		{"data_dir", nil, []func(*config.Config){func(c *config.Config) { c.Control.DataDir = "/srv/vigil" }}, []string{"data_dir"}},
		{"the store", nil, []func(*config.Config){etcd("http://a:8470", "a")}, []string{"control { store }"}},
		{"the history's rounds", nil, []func(*config.Config){func(c *config.Config) { c.Control.HistoryRounds = 120 }}, []string{"control { history { rounds } }"}},
		{"a moved listener with advertise and id unset",
			[]func(*config.Config){etcd("", "")},
			[]func(*config.Config){etcd("", ""), func(c *config.Config) { c.Control.API.Listen = "127.0.0.1:9000" }},
			[]string{`store "etcd" { advertise, id }`}},
		{"a moved listener with only id unset",
			[]func(*config.Config){etcd("http://a:8470", "")},
			[]func(*config.Config){etcd("http://a:8470", ""), func(c *config.Config) { c.Control.API.Listen = "127.0.0.1:9000" }},
			[]string{`store "etcd" { id }`}},
		{"a moved listener with both set",
			[]func(*config.Config){etcd("http://a:8470", "a")},
			[]func(*config.Config){etcd("http://a:8470", "a"), func(c *config.Config) { c.Control.API.Listen = "127.0.0.1:9000" }},
			nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, next := base(), base()
			for _, f := range tt.old {
				f(old)
			}
			for _, f := range tt.next {
				f(next)
			}
			got := needRestart(old, next)
			if len(got) != len(tt.want) {
				t.Fatalf("need restart %q, want %d settings named (%q)", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("setting %d: %q, want it to name %q", i, got[i], w)
				}
			}
		})
	}
}
