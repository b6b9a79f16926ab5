package edge

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/sdk/publication"
)

// TestTemplateReparse: Reparse reads the template's source again, wakes
// Watch so that the hub applies at once, and renders the new text; a
// source that no longer parses keeps the template in force.
func TestTemplateReparse(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src, dest := filepath.Join(dir, "edge.tmpl"), filepath.Join(dir, "edge.conf")
	write := func(text string) {
		if err := os.WriteFile(src, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("first {{range .Sites}}{{.Name}}{{end}}\n")
	b, _ := os.ReadFile(src)
	tm, err := NewTemplate(TemplateOptions{Name: "x", Files: []File{{Text: string(b), Dest: dest, Source: src}}})
	if err != nil {
		t.Fatal(err)
	}
	v, _ := Build(snap(1, 1, publication.Origin{Name: "a1", Address: "http://192.0.2.1", State: "healthy"}), nil, "", nil)
	if _, err := tm.Apply(ctx, v); err != nil {
		t.Fatal(err)
	}
	woke := make(chan struct{}, 4)
	wctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	go tm.Watch(wctx, func() { woke <- struct{}{} })

	write("second {{range .Sites}}{{.Name}}{{end}}\n")
	if n, err := tm.Reparse(); n != 1 || err != nil {
		t.Fatalf("Reparse: %d, %v; want one source read", n, err)
	}
	select {
	case <-woke:
	case <-time.After(time.Minute): // a hang guard only
		t.Fatal("Watch did not wake after Reparse")
	}
	if _, err := tm.Apply(ctx, v); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(dest); string(got) != "second www\n" {
		t.Fatalf("after Reparse the file is %q; want the new template's", got)
	}

	write("third {{range .Sites}\n")
	if _, err := tm.Reparse(); err == nil || !strings.Contains(err.Error(), src) {
		t.Fatalf("Reparse of a broken template: %v; want an error naming %s", err, src)
	}
	if out, err := tm.Render(v); err != nil || string(out[0]) != "second www\n" {
		t.Fatalf("after a refused Reparse: %q, %v; want the template in force kept", out, err)
	}

	builtin, err := NewTemplate(TemplateOptions{Name: "b", Files: []File{{Text: "x", Dest: filepath.Join(dir, "b")}}})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := builtin.Reparse(); n != 0 || err != nil {
		t.Fatalf("Reparse of a built-in template: %d, %v; want nothing read", n, err)
	}
}
