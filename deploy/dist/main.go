// Command dist builds vigil's release artifacts: static, -trimpath,
// version-stamped binaries for each OS and architecture, a tarball of each
// with SHA256SUMS beside them, and for Linux the Debian packages of the
// control plane (vigil) and of the edge agent (vigil-node), made with nfpm
// from deploy/nfpm/*.yaml. `make dist` runs it:
//
//	go run -C deploy/dist . -root ../.. -out ../../dist
//
// It is a module of its own so that the packager's dependencies stay out of
// vigil's go.mod.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // the deb packager
)

// DefaultPlatforms is the release matrix.
const DefaultPlatforms = "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64"

// packages are the Debian packages, by their nfpm definition under
// deploy/nfpm.
var packages = []string{"vigil", "vigil-node"}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "dist:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("dist", flag.ContinueOnError)
	root := fs.String("root", ".", "the vigil repository (a checkout: the version comes from git describe)")
	out := fs.String("out", "", "where the artifacts go (default ROOT/dist); emptied first")
	platforms := fs.String("platforms", DefaultPlatforms, "comma-separated GOOS/GOARCH pairs")
	version := fs.String("version", "", "the version to stamp (default: git describe --tags, or 0.0.0-N-gCOMMIT without a tag)")
	debs := fs.Bool("deb", true, "make the Debian packages for the linux platforms")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q: every setting is a flag (see -h)", fs.Args())
	}
	r, err := filepath.Abs(*root)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(r, "deploy", "nfpm")); err != nil {
		return fmt.Errorf("-root %s is not the vigil repository (no deploy/nfpm): %w", *root, err)
	}
	if *out == "" {
		*out = filepath.Join(r, "dist")
	}
	o, err := filepath.Abs(*out)
	if err != nil {
		return err
	}
	b, err := identify(r, *version)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "dist: vigil %s (commit %s, %s)\n", b.version, b.commit, b.date.Format(time.RFC3339))
	if err := os.RemoveAll(o); err != nil {
		return err
	}
	if err := os.MkdirAll(o, 0o755); err != nil {
		return err
	}
	mains, err := mainPackages(r)
	if err != nil {
		return err
	}
	var artifacts []string
	for _, p := range strings.Split(*platforms, ",") {
		goos, goarch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok || goos == "" || goarch == "" {
			return fmt.Errorf("-platforms: %q is not GOOS/GOARCH, such as linux/amd64", p)
		}
		name := fmt.Sprintf("vigil_%s_%s_%s", b.version, goos, goarch)
		binDir := filepath.Join(o, "build", goos+"_"+goarch)
		if err := build(r, binDir, goos, goarch, b, mains); err != nil {
			return err
		}
		tgz := filepath.Join(o, name+".tar.gz")
		if err := tarball(tgz, name, r, binDir, b.date); err != nil {
			return err
		}
		artifacts = append(artifacts, tgz)
		if *debs && goos == "linux" {
			ctx := filepath.Join(o, "container", "linux_"+goarch)
			if err := containerContext(ctx, r, binDir); err != nil {
				return err
			}
			for _, pkg := range packages {
				deb, err := debian(r, o, binDir, pkg, goarch, b)
				if err != nil {
					return err
				}
				artifacts = append(artifacts, deb)
			}
		}
	}
	if err := checksums(o, artifacts); err != nil {
		return err
	}
	for _, a := range artifacts {
		fmt.Fprintln(stdout, "dist:", filepath.Base(a))
	}
	return nil
}

// buildID is what the binaries are stamped with.
type buildID struct {
	version, commit string
	date            time.Time // the commit's time: the same tree builds the same
}

// identify reads the version, the commit and its date from git in root.
func identify(root, version string) (buildID, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return "", fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
		}
		return strings.TrimSpace(string(out)), nil
	}
	var b buildID
	var err error
	if b.commit, err = git("rev-parse", "--short=12", "HEAD"); err != nil {
		return b, fmt.Errorf("the version comes from git: %w (give -version, or run in a clone)", err)
	}
	ts, err := git("log", "-1", "--format=%ct", "HEAD")
	if err != nil {
		return b, err
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return b, fmt.Errorf("git log: commit time %q: %w", ts, err)
	}
	b.date = time.Unix(sec, 0).UTC()
	if sde := os.Getenv("SOURCE_DATE_EPOCH"); sde != "" {
		if sec, err := strconv.ParseInt(sde, 10, 64); err == nil {
			b.date = time.Unix(sec, 0).UTC()
		}
	}
	dirty := ""
	if st, err := git("status", "--porcelain", "--untracked-files=no"); err == nil && st != "" {
		dirty = "-dirty"
	}
	switch {
	case version != "":
		b.version = strings.TrimPrefix(version, "v")
	default:
		if d, err := git("describe", "--tags", "--match", "v[0-9]*", "HEAD"); err == nil {
			b.version = strings.TrimPrefix(d, "v") + dirty
		} else {
			// No release tag yet: 0.0.0, the commits since the start and
			// the commit, as git describe would put them.
			n, err := git("rev-list", "--count", "HEAD")
			if err != nil {
				return b, err
			}
			b.version = fmt.Sprintf("0.0.0-%s-g%s%s", n, b.commit, dirty)
		}
	}
	return b, nil
}

// mainPackages lists the main packages of the root module: every binary.
func mainPackages(root string) ([]string, error) {
	cmd := exec.Command("go", "list", "-f", `{{if eq .Name "main"}}{{.ImportPath}}{{end}}`, "./...")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w", err)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) == 0 {
		return nil, errors.New("go list found no main package")
	}
	return pkgs, nil
}

// build builds every main package for goos/goarch into dir: static,
// without the build machine's paths, stamped with b.
func build(root, dir, goos, goarch string, b buildID, mains []string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ldflags := fmt.Sprintf("-s -w -X main.version=%s -X main.commit=%s -X main.date=%s",
		b.version, b.commit, b.date.Format(time.RFC3339))
	args := append([]string{"build", "-trimpath", "-buildvcs=false", "-ldflags", ldflags, "-o", dir + "/"}, mains...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch, "GOFLAGS=")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build for %s/%s: %w", goos, goarch, err)
	}
	return nil
}

// tarball writes path: the directory name/ holding the binaries of binDir
// in bin/, the license, the readme and changelog, the default
// configuration and the systemd units. Times are date, owners root.
func tarball(path, name, root, binDir string, date time.Time) error {
	type entry struct{ src, dst string }
	var entries []entry
	bins, err := os.ReadDir(binDir)
	if err != nil {
		return err
	}
	for _, e := range bins {
		entries = append(entries, entry{filepath.Join(binDir, e.Name()), "bin/" + e.Name()})
	}
	for _, f := range []entry{
		{"LICENSE", "LICENSE"}, {"README.md", "README.md"}, {"CHANGELOG.md", "CHANGELOG.md"},
		{"docs/production.md", "docs/production.md"},
		{"deploy/vigil.hcl", "etc/vigil.hcl"}, {"deploy/vigil-node.env", "etc/vigil-node.env"},
		{"deploy/systemd/vigil.service", "systemd/vigil.service"}, {"deploy/systemd/vigil-node.service", "systemd/vigil-node.service"},
	} {
		entries = append(entries, entry{filepath.Join(root, f.src), f.dst})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].dst < entries[j].dst })
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	gz := gzip.NewWriter(f)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		if err := addFile(tw, e.src, name+"/"+e.dst, date); err != nil {
			f.Close()
			return err
		}
	}
	if err := tw.Close(); err != nil {
		f.Close()
		return err
	}
	if err := gz.Close(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func addFile(tw *tar.Writer, src, dst string, date time.Time) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("tarball: %w", err)
	}
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	mode := int64(0o644)
	if st.Mode()&0o111 != 0 {
		mode = 0o755
	}
	hdr := &tar.Header{Name: dst, Mode: mode, Size: int64(len(data)), ModTime: date, Typeflag: tar.TypeReg,
		Uname: "root", Gname: "root", Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = tw.Write(data)
	return err
}

// debian makes the Debian package pkg (deploy/nfpm/PKG.yaml) for goarch
// from the binaries in binDir, into out.
func debian(root, out, binDir, pkg, goarch string, b buildID) (string, error) {
	vars := map[string]string{"VERSION": b.version, "ARCH": goarch, "BINDIR": binDir, "ROOT": root}
	def := filepath.Join(root, "deploy", "nfpm", pkg+".yaml")
	cfg, err := nfpm.ParseFileWithEnvMapping(def, func(k string) string { return vars[k] })
	if err != nil {
		return "", fmt.Errorf("%s: %w", def, err)
	}
	info, err := cfg.Get("deb")
	if err != nil {
		return "", fmt.Errorf("%s: %w", def, err)
	}
	info.MTime = b.date
	info = nfpm.WithDefaults(info)
	if err := nfpm.PrepareForPackager(info, "deb"); err != nil {
		return "", fmt.Errorf("%s: %w", def, err)
	}
	packager, err := nfpm.Get("deb")
	if err != nil {
		return "", err
	}
	path := filepath.Join(out, packager.ConventionalFileName(info))
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if err := packager.Package(info, f); err != nil {
		f.Close()
		return "", fmt.Errorf("packaging %s: %w", pkg, err)
	}
	return path, f.Close()
}

// checksums writes out/SHA256SUMS for the artifacts, as sha256sum -c reads
// it.
func checksums(out string, artifacts []string) error {
	var b strings.Builder
	for _, a := range artifacts {
		f, err := os.Open(a)
		if err != nil {
			return err
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(h.Sum(nil)), filepath.Base(a))
	}
	return os.WriteFile(filepath.Join(out, "SHA256SUMS"), []byte(b.String()), 0o644)
}

// caBundle is the host's CA certificates, copied into the image so that
// the probes can check https origins.
const caBundle = "/etc/ssl/certs/ca-certificates.crt"

// containerContext writes the image's build context into dir: the
// Dockerfile; rootfs/, the image's root; state/ and tmp/, empty, which
// the Dockerfile copies to /var/lib/vigil and /tmp owned by the user.
func containerContext(dir, root, binDir string) error {
	rootfs := filepath.Join(dir, "rootfs")
	type file struct {
		src, dst string
		data     []byte
		mode     os.FileMode
	}
	files := []file{
		{src: filepath.Join(root, "deploy", "container", "Dockerfile"), dst: "../Dockerfile", mode: 0o644},
		{src: filepath.Join(binDir, "vigil"), dst: "usr/bin/vigil", mode: 0o755},
		{src: filepath.Join(root, "deploy", "container", "vigil.hcl"), dst: "etc/vigil/vigil.hcl", mode: 0o644},
		{src: caBundle, dst: "etc/ssl/certs/ca-certificates.crt", mode: 0o644},
		{src: filepath.Join(root, "LICENSE"), dst: "usr/share/doc/vigil/LICENSE", mode: 0o644},
		{dst: "etc/passwd", data: []byte("root:x:0:0:root:/:/sbin/nologin\nvigil:x:65532:65532:vigil:/var/lib/vigil:/sbin/nologin\n"), mode: 0o644},
		{dst: "etc/group", data: []byte("root:x:0:\nvigil:x:65532:\n"), mode: 0o644},
	}
	for _, p := range []string{"vigil-source-direct", "vigil-source-node", "vigil-source-dnspup"} {
		files = append(files, file{src: filepath.Join(binDir, p), dst: "usr/lib/vigil/plugins/" + p, mode: 0o755})
	}
	for _, f := range files {
		data := f.data
		if f.src != "" {
			var err error
			if data, err = os.ReadFile(f.src); err != nil {
				if f.src == caBundle {
					return fmt.Errorf("the image needs the CA certificates: %w (apt-get install ca-certificates)", err)
				}
				return fmt.Errorf("container: %w", err)
			}
		}
		dst := filepath.Join(rootfs, filepath.FromSlash(f.dst))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(dst, data, f.mode); err != nil {
			return err
		}
	}
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{"state", 0o750}, {"tmp", 0o777 | os.ModeSticky}} {
		p := filepath.Join(dir, d.path)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		if err := os.Chmod(p, d.mode); err != nil {
			return err
		}
	}
	return nil
}
