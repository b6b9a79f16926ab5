package edge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/template"
	"time"
)

// Defaults of TemplateOptions.
const (
	DefaultMinReloadInterval = time.Second
	DefaultCommandTimeout    = 30 * time.Second
)

// CandidatePlaceholder in a check command is replaced by the path of the
// rendered file before it replaces the old one (for a check that can read
// the file on its own, such as `haproxy -c -f {candidate}`). Without it,
// the new file is put in place, checked, and the old one put back when the
// check fails.
const CandidatePlaceholder = "{candidate}"

// File is one template and the file it renders.
type File struct {
	// Name names the template in errors (default: the base name of Dest).
	Name string
	// Text is the template (Go text/template, executed with a *View).
	Text string
	// Dest is the rendered file, replaced atomically.
	Dest string
	// Mode is Dest's permission bits (default 0644).
	Mode fs.FileMode
	// Source, when set, is the file Text was read from: Reparse reads it
	// again (empty for a built-in template, which never changes).
	Source string
}

// TemplateOptions configure a template driver.
type TemplateOptions struct {
	// Name is the edge's name: the driver is "template:" + Name.
	Name string
	// Files are rendered in order.
	Files []File
	// Check, when set, is run by /bin/sh after the files are rendered and
	// before they are reloaded; a failure puts the old files back (see
	// CandidatePlaceholder) and is reported. Reload, when set, is run after
	// a successful check, at most once per MinInterval.
	Check, Reload string
	// MinInterval is the least time between two reloads (default 1s): a
	// publication within it waits, and the newest one is rendered then.
	MinInterval time.Duration
	// Timeout bounds each command (default 30s).
	Timeout time.Duration
}

// Template renders files from Views and reloads the edge.
type Template struct {
	opts  TemplateOptions
	tmpls []*template.Template

	// reparsed wakes Watch after Reparse took new templates in; tmplMu
	// guards tmpls, which Reparse replaces.
	reparsed chan struct{}
	tmplMu   sync.Mutex

	mu         sync.Mutex
	lastReload time.Time
	// dirty is set when files changed but the reload did not happen or
	// failed: the next Apply reloads even if the files are unchanged.
	dirty bool
}

// Funcs are the functions templates may call besides text/template's own:
// join (strings.Join), ident (Ident), lower, upper.
var Funcs = template.FuncMap{
	"join":  strings.Join,
	"ident": Ident,
	"lower": strings.ToLower,
	"upper": strings.ToUpper,
}

// NewTemplate parses the templates and returns the driver.
func NewTemplate(opts TemplateOptions) (*Template, error) {
	if len(opts.Files) == 0 {
		return nil, errors.New("template: no file to render")
	}
	if opts.MinInterval <= 0 {
		opts.MinInterval = DefaultMinReloadInterval
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultCommandTimeout
	}
	if strings.Contains(opts.Check, CandidatePlaceholder) && len(opts.Files) != 1 {
		return nil, fmt.Errorf("template: the check names %s but %d files are rendered: use it with one file only", CandidatePlaceholder, len(opts.Files))
	}
	t := &Template{opts: opts, reparsed: make(chan struct{}, 1)}
	for i := range opts.Files {
		f := &t.opts.Files[i]
		if f.Dest == "" {
			return nil, fmt.Errorf("template %d: no destination file", i+1)
		}
		if f.Name == "" {
			f.Name = filepath.Base(f.Dest)
		}
		if f.Mode == 0 {
			f.Mode = 0o644
		}
		tm, err := template.New(f.Name).Funcs(Funcs).Option("missingkey=error").Parse(f.Text)
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", f.Name, err)
		}
		t.tmpls = append(t.tmpls, tm)
	}
	return t, nil
}

// Name implements Driver.
func (t *Template) Name() string { return "template:" + t.opts.Name }

// Reparse reads every file's Source again and parses the templates. When
// all of them parse, they replace the ones in force, and the hub renders
// and applies them at once (Watch); a source that cannot be read or
// parsed keeps every template as it was and is the error. It reports how
// many sources it read (0 when every template is built in).
func (t *Template) Reparse() (int, error) {
	n := 0
	var tmpls []*template.Template
	for _, f := range t.opts.Files {
		if f.Source == "" {
			tmpls = append(tmpls, nil)
			continue
		}
		b, err := os.ReadFile(f.Source)
		if err != nil {
			return 0, fmt.Errorf("template %s: %w", f.Source, err)
		}
		tm, err := template.New(f.Name).Funcs(Funcs).Option("missingkey=error").Parse(string(b))
		if err != nil {
			return 0, fmt.Errorf("template %s: %w", f.Source, err)
		}
		tmpls = append(tmpls, tm)
		n++
	}
	if n == 0 {
		return 0, nil
	}
	t.tmplMu.Lock()
	for i, tm := range tmpls {
		if tm != nil {
			t.tmpls[i] = tm
		}
	}
	t.tmplMu.Unlock()
	select {
	case t.reparsed <- struct{}{}:
	default:
	}
	return n, nil
}

// Watch implements Watcher: after a Reparse, the hub applies the
// publication again through the new templates without waiting for its
// resync.
func (t *Template) Watch(ctx context.Context, changed func()) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.reparsed:
			changed()
		}
	}
}

// Render executes the templates with v and returns each file's content.
func (t *Template) Render(v *View) ([][]byte, error) {
	t.tmplMu.Lock()
	tmpls := slices.Clone(t.tmpls)
	t.tmplMu.Unlock()
	out := make([][]byte, len(tmpls))
	for i, tm := range tmpls {
		var b bytes.Buffer
		if err := tm.Execute(&b, v); err != nil {
			return nil, fmt.Errorf("rendering %s: %w", t.opts.Files[i].Name, err)
		}
		out[i] = b.Bytes()
	}
	return out, nil
}

// Apply implements Driver: render, and when a file changed, write, check
// and reload.
func (t *Template) Apply(ctx context.Context, v *View) (Result, error) {
	return t.apply(ctx, v, true)
}

// Write renders, writes and checks the files without reloading (HAProxy's
// runtime driver keeps its fallback configuration current this way).
func (t *Template) Write(ctx context.Context, v *View) (Result, error) {
	return t.apply(ctx, v, false)
}

func (t *Template) apply(ctx context.Context, v *View, reload bool) (Result, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	content, err := t.Render(v)
	if err != nil {
		return Result{}, fmt.Errorf("%w; the old files stay", err)
	}
	old := make([][]byte, len(content))
	existed := make([]bool, len(content))
	changed := 0
	for i, f := range t.opts.Files {
		b, err := os.ReadFile(f.Dest)
		switch {
		case err == nil:
			old[i], existed[i] = b, true
		case !errors.Is(err, fs.ErrNotExist):
			return Result{}, fmt.Errorf("reading %s: %w", f.Dest, err)
		}
		if !existed[i] || !bytes.Equal(b, content[i]) {
			changed++
		}
	}
	needReload := reload && t.opts.Reload != "" && (changed > 0 || t.dirty)
	if changed == 0 && !needReload {
		return Result{}, nil
	}
	if needReload {
		if next := t.lastReload.Add(t.opts.MinInterval); time.Now().Before(next) {
			return Result{}, &RetryAt{At: next, Reason: fmt.Sprintf("a reload ran less than %s ago", t.opts.MinInterval)}
		}
	}
	res := Result{Changes: changed}
	if changed > 0 {
		if err := t.replace(ctx, content, old, existed); err != nil {
			return Result{}, err
		}
		t.dirty = true // until a reload loads them
	}
	if !needReload {
		return res, nil
	}
	t.lastReload = time.Now()
	if out, err := t.run(ctx, t.opts.Reload); err != nil {
		return res, fmt.Errorf("reload command failed (the new files are in place and checked; the reload is retried): %w%s", err, out)
	}
	t.dirty = false
	res.Reloaded = true
	return res, nil
}

// replace writes the new content, checked, or leaves the old files.
func (t *Template) replace(ctx context.Context, content, old [][]byte, existed []bool) error {
	if strings.Contains(t.opts.Check, CandidatePlaceholder) {
		f := t.opts.Files[0]
		tmp, err := writeTemp(f.Dest, content[0], f.Mode)
		if err != nil {
			return err
		}
		defer os.Remove(tmp)
		if out, err := t.run(ctx, strings.ReplaceAll(t.opts.Check, CandidatePlaceholder, shellQuote(tmp))); err != nil {
			return fmt.Errorf("check command refused the rendered %s (the old file stays): %w%s", f.Name, err, out)
		}
		return rename(tmp, f.Dest)
	}
	for i, f := range t.opts.Files {
		if err := writeAtomic(f.Dest, content[i], f.Mode); err != nil {
			t.restore(old, existed, i)
			return err
		}
	}
	if t.opts.Check == "" {
		return nil
	}
	if out, err := t.run(ctx, t.opts.Check); err != nil {
		if rerr := t.restore(old, existed, len(t.opts.Files)); rerr != nil {
			return fmt.Errorf("check command refused the rendered files, and putting the old ones back failed (%v): %w%s", rerr, err, out)
		}
		return fmt.Errorf("check command refused the rendered files (the old ones are back): %w%s", err, out)
	}
	return nil
}

// restore puts the old content of the first n files back.
func (t *Template) restore(old [][]byte, existed []bool, n int) error {
	var errs []error
	for i := range n {
		f := t.opts.Files[i]
		if !existed[i] {
			if err := os.Remove(f.Dest); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			continue
		}
		errs = append(errs, writeAtomic(f.Dest, old[i], f.Mode))
	}
	return errors.Join(errs...)
}

// run runs cmd with /bin/sh; on failure out is the end of its output,
// ready to append to an error.
func (t *Template) run(ctx context.Context, cmd string) (out string, err error) {
	ctx, cancel := context.WithTimeout(ctx, t.opts.Timeout)
	defer cancel()
	c := exec.CommandContext(ctx, "/bin/sh", "-c", cmd)
	c.WaitDelay = time.Second
	b, err := c.CombinedOutput()
	if err == nil {
		return "", nil
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 2048 {
		s = "..." + s[len(s)-2048:]
	}
	if s != "" {
		s = ": " + s
	}
	return s, fmt.Errorf("%q: %w", cmd, err)
}

func writeTemp(dest string, b []byte, mode fs.FileMode) (string, error) {
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".vigil-*")
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", dest, err)
	}
	_, werr := tmp.Write(b)
	serr := tmp.Sync()
	cerr := tmp.Close()
	if err := errors.Join(werr, serr, cerr, os.Chmod(tmp.Name(), mode)); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("writing %s: %w", dest, err)
	}
	return tmp.Name(), nil
}

func rename(tmp, dest string) error {
	if err := os.Rename(tmp, dest); err != nil {
		return fmt.Errorf("writing %s: %w", dest, err)
	}
	if d, err := os.Open(filepath.Dir(dest)); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// writeAtomic replaces dest with b: a temporary file in its folder, synced,
// renamed over it.
func writeAtomic(dest string, b []byte, mode fs.FileMode) error {
	tmp, err := writeTemp(dest, b, mode)
	if err != nil {
		return err
	}
	if err := rename(tmp, dest); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
