package edge

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/plugins/node/templates"
	"github.com/vigilcdn/vigil/sdk/publication"
)

func snap(version uint64, level int, origins ...publication.Origin) *publication.Snapshot {
	return &publication.Snapshot{Version: version, Sites: []publication.Site{{Name: "www", Hostname: "www.example.com", Level: level, Origins: origins}}}
}

var topo = Topology{"www": {
	{Name: "a1", Address: "http://192.0.2.1:8080", Level: 1, State: "healthy"},
	{Name: "a2", Address: "https://192.0.2.2", Level: 1, State: "healthy"},
	{Name: "b1", Address: "http://[2001:db8::1]", Level: 2, State: "healthy"},
	{Name: "c1", Address: "http://c.example.net", Level: 3, State: "unknown"},
}}

func TestBuild(t *testing.T) {
	tests := []struct {
		name        string
		level       int
		origins     []publication.Origin
		topo        Topology
		wantBackup  []string
		wantOthers  []string
		wantScheme  string
		wantSkipped int
	}{
		{"level 1, next is 2", 1, []publication.Origin{{Name: "a1", Address: "http://192.0.2.1:8080", State: "healthy"}, {Name: "a2", Address: "https://192.0.2.2", State: "unhealthy"}}, topo,
			[]string{"b1"}, []string{"b1", "c1"}, "https", 0},
		{"last level: backup is the one before", 3, []publication.Origin{{Name: "c1", Address: "http://c.example.net", State: "healthy"}}, topo,
			[]string{"b1"}, []string{"a1", "a2", "b1"}, "http", 0},
		{"no topology", 2, []publication.Origin{{Name: "b1", Address: "http://[2001:db8::1]", State: "healthy"}}, nil, nil, nil, "http", 0},
		{"unusable address left out", 1, []publication.Origin{{Name: "x", Address: "ftp://192.0.2.9", State: "healthy"}}, nil, nil, nil, "http", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, skipped := Build(snap(1, tt.level, tt.origins...), tt.topo, "vigil_", nil)
			s := v.Sites[0]
			if s.Backend != "vigil_www" || s.Scheme != tt.wantScheme || len(skipped) != tt.wantSkipped {
				t.Fatalf("backend %q scheme %q skipped %v", s.Backend, s.Scheme, skipped)
			}
			if got := names(s.Backup); strings.Join(got, ",") != strings.Join(tt.wantBackup, ",") {
				t.Errorf("backup %v, want %v", got, tt.wantBackup)
			}
			if got := names(s.Others); strings.Join(got, ",") != strings.Join(tt.wantOthers, ",") {
				t.Errorf("others %v, want %v", got, tt.wantOthers)
			}
		})
	}
	v, _ := Build(snap(1, 2, publication.Origin{Name: "b 1", Address: "http://[2001:db8::1]", State: "healthy"}), nil, "", nil)
	if o := v.Sites[0].Origins[0]; o.Server != "b_1" || o.HostPort != "[2001:db8::1]:80" || o.Port != "80" {
		t.Errorf("origin %+v", o)
	}
}

func names(os []Origin) []string {
	var out []string
	for _, o := range os {
		out = append(out, o.Name)
	}
	return out
}

func TestShippedTemplatesRender(t *testing.T) {
	for _, name := range templates.Names() {
		t.Run(name, func(t *testing.T) {
			text, err := templates.Get(name)
			if err != nil {
				t.Fatal(err)
			}
			tm, err := NewTemplate(TemplateOptions{Name: name, Files: []File{{Text: text, Dest: filepath.Join(t.TempDir(), "out")}}})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range []*publication.Snapshot{
				snap(1, 1, publication.Origin{Name: "a1", Address: "http://192.0.2.1:8080", State: "healthy"}),
				snap(2, 2), // no origin at all
			} {
				v, _ := Build(s, topo, "", map[string]string{"listen": "127.0.0.1:8080"})
				out, err := tm.Render(v)
				if err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(string(out[0]), "www") {
					t.Errorf("no backend for www:\n%s", out[0])
				}
			}
		})
	}
	if _, err := templates.Get("nosuch"); err == nil {
		t.Error("an unknown template was found")
	}
}

func TestTemplate(t *testing.T) {
	ctx := context.Background()
	v1, _ := Build(snap(1, 1, publication.Origin{Name: "a1", Address: "http://192.0.2.1", State: "healthy"}), nil, "", nil)
	v2, _ := Build(snap(2, 2, publication.Origin{Name: "b1", Address: "http://192.0.2.2", State: "healthy"}), nil, "", nil)
	text := "{{range .Sites}}{{.Name}} {{.Level}}{{range .Origins}} {{.HostPort}}{{end}}{{end}}\n"

	t.Run("check fails: the old file stays", func(t *testing.T) {
		for _, check := range []string{"grep -q 192.0.2.1 " + CandidatePlaceholder, "grep -q 192.0.2.1 DEST"} {
			dir := t.TempDir()
			dest := filepath.Join(dir, "edge.conf")
			log := filepath.Join(dir, "reloads")
			tm, err := NewTemplate(TemplateOptions{Name: "x", Files: []File{{Text: text, Dest: dest}},
				Check: strings.ReplaceAll(check, "DEST", dest), Reload: "echo r >> " + log, MinInterval: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if res, err := tm.Apply(ctx, v1); err != nil || !res.Reloaded {
				t.Fatalf("first apply: %+v %v", res, err)
			}
			time.Sleep(2 * time.Millisecond)
			_, err = tm.Apply(ctx, v2)
			if err == nil || !strings.Contains(err.Error(), "check command refused") {
				t.Fatalf("apply of a refused file: %v", err)
			}
			if b, _ := os.ReadFile(dest); string(b) != "www 1 192.0.2.1:80\n" {
				t.Errorf("%s: the file is %q", check, b)
			}
			if b, _ := os.ReadFile(log); string(b) != "r\n" {
				t.Errorf("%s: reloads %q", check, b)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 2 {
				t.Errorf("%s: leftover files %v", check, entries)
			}
		}
	})
	t.Run("minimum interval between reloads", func(t *testing.T) {
		dest := filepath.Join(t.TempDir(), "edge.conf")
		tm, err := NewTemplate(TemplateOptions{Name: "x", Files: []File{{Text: text, Dest: dest}}, Reload: "true", MinInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tm.Apply(ctx, v1); err != nil {
			t.Fatal(err)
		}
		if res, err := tm.Apply(ctx, v1); err != nil || res.Changes != 0 {
			t.Fatalf("unchanged: %+v %v", res, err)
		}
		_, err = tm.Apply(ctx, v2)
		var later *RetryAt
		if !errors.As(err, &later) || time.Until(later.At) < 59*time.Minute {
			t.Fatalf("apply within the interval: %v", err)
		}
		if b, _ := os.ReadFile(dest); string(b) != "www 1 192.0.2.1:80\n" {
			t.Errorf("the file changed before its reload was due: %q", b)
		}
	})
	t.Run("failed reload is retried", func(t *testing.T) {
		dir := t.TempDir()
		dest, flag := filepath.Join(dir, "edge.conf"), filepath.Join(dir, "ok")
		tm, err := NewTemplate(TemplateOptions{Name: "x", Files: []File{{Text: text, Dest: dest}}, Reload: "test -f " + flag, MinInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tm.Apply(ctx, v1); err == nil || !strings.Contains(err.Error(), "reload command failed") {
			t.Fatalf("failing reload: %v", err)
		}
		_ = os.WriteFile(flag, nil, 0o644)
		time.Sleep(2 * time.Millisecond)
		if res, err := tm.Apply(ctx, v1); err != nil || !res.Reloaded {
			t.Fatalf("retry: %+v %v", res, err)
		}
	})
	t.Run("bad template", func(t *testing.T) {
		if _, err := NewTemplate(TemplateOptions{Name: "x", Files: []File{{Text: "{{.Nope", Dest: "/tmp/x"}}}); err == nil {
			t.Fatal("parsed")
		}
		tm, _ := NewTemplate(TemplateOptions{Name: "x", Files: []File{{Text: "{{.Nope}}", Dest: filepath.Join(t.TempDir(), "x")}}})
		if _, err := tm.Apply(ctx, v1); err == nil || !strings.Contains(err.Error(), "the old files stay") {
			t.Fatalf("render error: %v", err)
		}
	})
}
