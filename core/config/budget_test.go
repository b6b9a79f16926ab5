package config_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/vigilcdn/vigil/core/config"
)

// chain returns a configuration with the given source timeouts ("" for
// none) and one site with probeTimeout ("" for none).
func chain(interval string, timeouts []string, probeTimeout string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "control { round_interval = %q }\n", interval)
	for i, t := range timeouts {
		fmt.Fprintf(&b, "source \"s%d\" {\n  plugin = \"p\"\n", i)
		if t != "" {
			fmt.Fprintf(&b, "  timeout = %q\n", t)
		}
		b.WriteString("}\n")
	}
	b.WriteString("site \"www\" {\n  hostname = \"www.example.com\"\n")
	if probeTimeout != "" {
		fmt.Fprintf(&b, "  health_check { timeout = %q }\n", probeTimeout)
	}
	b.WriteString("  origin \"a1\" { address = \"http://127.0.0.1:1\" }\n  origin \"a2\" { address = \"http://127.0.0.1:2\" }\n}\n")
	return b.String()
}

func TestSourceDeadlinesShareTheRound(t *testing.T) {
	tests := []struct {
		name     string
		interval string
		timeouts []string
		want     []time.Duration
		warn     bool
	}{
		{"one source takes the budget", "30s", []string{""}, []time.Duration{28 * time.Second}, false},
		{"three share it", "30s", []string{"", "", ""}, []time.Duration{9333 * time.Millisecond, 9333 * time.Millisecond, 9333 * time.Millisecond}, false},
		{"a short round", "2s", []string{"", "", ""}, []time.Duration{600 * time.Millisecond, 600 * time.Millisecond, 600 * time.Millisecond}, false},
		{"set ones keep theirs, the rest share what is left", "30s", []string{"10s", "", ""}, []time.Duration{10 * time.Second, 9 * time.Second, 9 * time.Second}, false},
		{"set ones that overrun the round warn", "10s", []string{"8s", "8s", ""}, []time.Duration{8 * time.Second, 8 * time.Second, 1500 * time.Millisecond}, true},
		{"set ones within the round do not", "10s", []string{"4s", "4s"}, []time.Duration{4 * time.Second, 4 * time.Second}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := config.Parse("c.hcl", []byte(chain(tt.interval, tt.timeouts, "")))
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			for i, s := range cfg.Sources {
				if s.Timeout != tt.want[i] {
					t.Errorf("source %s deadline %v, want %v", s.Name, s.Timeout, tt.want[i])
				}
			}
			warned := false
			for _, d := range diags {
				if d.Severity == hcl.DiagWarning && d.Summary == "Source deadlines exceed round_interval" {
					warned = true
					if d.Subject == nil || d.Subject.Start.Line == 0 {
						t.Errorf("the warning points nowhere")
					}
				}
			}
			if warned != tt.warn {
				t.Errorf("warned %v, want %v: %v", warned, tt.warn, diags)
			}
		})
	}
}

// TestNoTimeoutsAlwaysFit: whatever the number of sources, a configuration
// that sets no timeout is valid and every probe fits its source.
func TestNoTimeoutsAlwaysFit(t *testing.T) {
	for _, n := range []int{1, 3, 4, 10, 64} {
		for _, interval := range []string{"1s", "2s", "30s", "5m"} {
			t.Run(fmt.Sprintf("%d sources every %s", n, interval), func(t *testing.T) {
				cfg, diags := config.Parse("c.hcl", []byte(chain(interval, make([]string, n), "")))
				if len(diags) > 0 {
					t.Fatalf("diagnostics for a configuration without timeouts: %v", diags)
				}
				var total time.Duration
				hc := cfg.Sites[0].HealthCheck
				for _, s := range cfg.Sources {
					total += s.Timeout
					pt := hc.ProbeTimeout(s.Timeout)
					if pt <= 0 || pt > config.MaxProbeTimeout(s.Timeout) || pt > config.DefaultProbeTimeout {
						t.Errorf("probe timeout %v in a source of %v", pt, s.Timeout)
					}
				}
				if total > cfg.Control.RoundInterval {
					t.Errorf("deadlines add up to %v, more than round_interval %v", total, cfg.Control.RoundInterval)
				}
			})
		}
	}
}

func TestProbeTimeout(t *testing.T) {
	cfg, diags := config.Parse("c.hcl", []byte(chain("2s", []string{"", "", ""}, "")))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	hc := cfg.Sites[0].HealthCheck
	if got := hc.ProbeTimeout(cfg.Sources[0].Timeout); got != 480*time.Millisecond {
		t.Errorf("default probe timeout in a 600ms source = %v, want 480ms (the default, shortened to fit)", got)
	}
	if got := hc.ProbeTimeout(20 * time.Second); got != 5*time.Second {
		t.Errorf("default probe timeout in a 20s source = %v, want 5s", got)
	}
	cfg, diags = config.Parse("c.hcl", []byte(chain("30s", []string{""}, "7s")))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if got := cfg.Sites[0].HealthCheck.ProbeTimeout(time.Minute); got != 7*time.Second {
		t.Errorf("a set probe timeout = %v, want it as set (7s)", got)
	}
}

// TestProbeFitErrorsAreCapped: a rule broken by a whole fleet is reported
// for the first sites and counted for the rest.
func TestProbeFitErrorsAreCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString("source \"direct\" {\n  plugin = \"p\"\n  timeout = \"2s\"\n}\n")
	for i := 0; i < 50; i++ {
		fmt.Fprintf(&b, "site \"s%d\" {\n  hostname = \"s%d.example.com\"\n  health_check { timeout = \"5s\" }\n  origin \"a\" { address = \"http://127.0.0.1:1\" }\n  origin \"b\" { address = \"http://127.0.0.1:2\" }\n}\n", i, i)
	}
	_, diags := config.Parse("c.hcl", []byte(b.String()))
	if n := len(diags.Errs()); n != 11 {
		t.Fatalf("%d errors for 50 sites, want 10 and one that counts the other 40: %v", n, diags)
	}
	if last := diags[len(diags)-1]; !strings.Contains(last.Detail, "40 more places") {
		t.Fatalf("last diagnostic %q does not count the rest", last.Detail)
	}
}

func TestHealthCheckSettings(t *testing.T) {
	src := `
source "direct" { plugin = "p" }
site "a" {
  hostname = "a.example.com"
  health_check {
    ca_file                  = "testdata/ca/ca.pem"
    tls_server_name          = "Origin.Example.NET"
    insecure_skip_tls_verify = false
    headers                  = { "x-probe" = "1", "Authorization" = "Bearer s3cret" }
    follow_redirects         = true
    max_body                 = "64KiB"
  }
  origin "a1" { address = "https://127.0.0.1:1" }
  origin "a2" { address = "https://127.0.0.1:2" }
}
site "b" {
  hostname = "b.example.com"
  health_check { max_body = 4096 }
  origin "b1" { address = "https://127.0.0.1:1" }
  origin "b2" { address = "https://127.0.0.1:2" }
}
site "c" {
  hostname = "c.example.com"
  health_check { max_body = 4096 }
  origin "c1" { address = "https://127.0.0.1:1" }
  origin "c2" { address = "https://127.0.0.1:2" }
}
site "d" {
  hostname = "d.example.com"
  origin "d1" { address = "https://127.0.0.1:1" }
  origin "d2" { address = "https://127.0.0.1:2" }
}
site "e" {
  hostname = "e.example.com"
  origin "e1" { address = "https://127.0.0.1:1" }
  origin "e2" { address = "https://127.0.0.1:2" }
}`
	// The config's folder is the package folder, so ca_file is relative to it.
	cfg, diags := config.Parse("config.hcl", []byte(src))
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	a := cfg.Site("a").HealthCheck
	checks := []struct {
		name string
		ok   bool
	}{
		{"CA read", len(a.CA) > 0 && strings.HasPrefix(a.CAName, "sha256:") && a.CAFile == "testdata/ca/ca.pem"},
		{"server name lower-cased", a.TLSServerName == "origin.example.net"},
		{"headers canonical", a.Headers["X-Probe"] == "1" && a.Headers["Authorization"] == "Bearer s3cret"},
		{"follow redirects", a.FollowRedirects},
		{"max_body with a unit", a.MaxBody == 64<<10},
		{"max_body in bytes", cfg.Site("b").HealthCheck.MaxBody == 4096},
		{"the same block shared", cfg.Site("b").HealthCheck == cfg.Site("c").HealthCheck},
		{"no block: the shared default", cfg.Site("d").HealthCheck == cfg.Site("e").HealthCheck && cfg.Site("d").HealthCheck.MaxBody == 0},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if !c.ok {
				t.Fatalf("%+v", a)
			}
		})
	}
	if strings.Contains(fmt.Sprint(diags), "s3cret") {
		t.Fatal("a header value reached a diagnostic")
	}
}

func TestInsecureWarns(t *testing.T) {
	_, diags := config.Parse("c.hcl", []byte(`
source "direct" { plugin = "p" }
site "a" {
  hostname = "a.example.com"
  health_check { insecure_skip_tls_verify = true }
  origin "a1" { address = "https://127.0.0.1:1" }
  origin "a2" { address = "https://127.0.0.1:2" }
}`))
	if diags.HasErrors() || len(diags) != 1 || diags[0].Severity != hcl.DiagWarning || !strings.Contains(diags[0].Summary, "verification is off") {
		t.Fatalf("diagnostics %v, want one warning that verification is off", diags)
	}
}

func TestCAFileErrors(t *testing.T) {
	for _, tt := range []struct{ file, want string }{
		{"testdata/ca/notpem.txt", "holds no PEM certificate"},
		{"testdata/ca", "is a directory"},
	} {
		t.Run(tt.file, func(t *testing.T) {
			_, diags := config.Parse("config.hcl", []byte(fmt.Sprintf(`
source "direct" { plugin = "p" }
site "a" {
  hostname = "a.example.com"
  health_check { ca_file = %q }
  origin "a1" { address = "https://127.0.0.1:1" }
  origin "a2" { address = "https://127.0.0.1:2" }
}`, tt.file)))
			if !diags.HasErrors() || !strings.Contains(diags.Error(), tt.want) {
				t.Fatalf("diagnostics %v, want %q", diags, tt.want)
			}
		})
	}
}
