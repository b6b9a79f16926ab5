package deploy

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// need skips the test when the command is missing, unless CI is set:
// then it fails (make deps installs them).
func need(t *testing.T, cmds ...string) {
	t.Helper()
	for _, c := range cmds {
		if _, err := exec.LookPath(c); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is missing: run make deps", c)
			}
			t.Skipf("%s is missing (make deps installs it)", c)
		}
	}
}

// runOK runs name with args and returns its standard output; a failure
// fails the test with what it printed.
func runOK(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", name, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// TestDistLinuxAMD64 runs the release builder (what make dist runs, for
// linux/amd64 only) and checks what it made: the checksums, static
// binaries that each answer -version with the stamped version, Debian
// packages that unpack into a scratch root where `vigil version` runs and
// the systemd units verify, a default configuration that validates, and
// the container image's root (built with buildah when it is installed).
func TestDistLinuxAMD64(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a release")
	}
	need(t, "git", "dpkg-deb", "systemd-analyze")
	out := t.TempDir()
	log := runOK(t, "dist", "go", "run", ".", "-root", "../..", "-out", out, "-platforms", "linux/amd64")
	m := regexp.MustCompile(`(?m)^dist: vigil (\S+) \(commit (\S+),`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("dist did not say the version:\n%s", log)
	}
	version, commit := m[1], m[2]
	if !regexp.MustCompile(`^\d+\.\d+\.\d+`).MatchString(version) {
		t.Fatalf("version %q does not start with MAJOR.MINOR.PATCH", version)
	}
	debVersion := strings.Replace(version, "-", "~", 1)
	tarName := "vigil_" + version + "_linux_amd64"
	debs := map[string]string{
		"vigil":      filepath.Join(out, "vigil_"+debVersion+"_amd64.deb"),
		"vigil-node": filepath.Join(out, "vigil-node_"+debVersion+"_amd64.deb"),
	}

	t.Run("checksums", func(t *testing.T) {
		sums, err := os.ReadFile(filepath.Join(out, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		want := []string{tarName + ".tar.gz", filepath.Base(debs["vigil"]), filepath.Base(debs["vigil-node"])}
		lines := strings.Split(strings.TrimSpace(string(sums)), "\n")
		if len(lines) != len(want) {
			t.Fatalf("SHA256SUMS has %d lines, want %d:\n%s", len(lines), len(want), sums)
		}
		for i, line := range lines {
			sum, name, _ := strings.Cut(line, "  ")
			if name != want[i] {
				t.Errorf("SHA256SUMS line %d names %q, want %q", i+1, name, want[i])
				continue
			}
			b, err := os.ReadFile(filepath.Join(out, name))
			if err != nil {
				t.Fatal(err)
			}
			if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != sum {
				t.Errorf("%s: SHA256SUMS says %s, the file's is %x", name, sum, h)
			}
		}
	})

	t.Run("tarball binaries are static and answer -version", func(t *testing.T) {
		dir := t.TempDir()
		runOK(t, dir, "tar", "xzf", filepath.Join(out, tarName+".tar.gz"))
		root := filepath.Join(dir, tarName)
		for _, f := range []string{"LICENSE", "README.md", "CHANGELOG.md", "docs/production.md", "etc/vigil.hcl", "systemd/vigil.service"} {
			if _, err := os.Stat(filepath.Join(root, f)); err != nil {
				t.Errorf("the tarball lacks %s: %v", f, err)
			}
		}
		bins, err := os.ReadDir(filepath.Join(root, "bin"))
		if err != nil {
			t.Fatal(err)
		}
		names := map[string]bool{}
		for _, b := range bins {
			names[b.Name()] = true
		}
		for _, want := range []string{"vigil", "vigil-node", "vigil-source-direct", "vigil-source-node", "vigil-source-dnspup", "vigil-demo-origin", "vigil-fake-dnspup"} {
			if !names[want] {
				t.Errorf("the tarball lacks bin/%s", want)
			}
		}
		for _, b := range bins {
			t.Run(b.Name(), func(t *testing.T) {
				path := filepath.Join(root, "bin", b.Name())
				assertStatic(t, path)
				arg := "-version"
				if b.Name() == "vigil" {
					arg = "version"
				}
				got := strings.TrimSpace(runOK(t, dir, path, arg))
				want := b.Name() + " " + version + " (commit " + commit
				if !strings.HasPrefix(got, want) || !strings.Contains(got, "built ") {
					t.Errorf("%s %s = %q, want it to start with %q and say when it was built", b.Name(), arg, got, want)
				}
			})
		}
	})

	// The packages unpacked into one scratch root, as dpkg would lay them.
	root := t.TempDir()
	for _, deb := range debs {
		runOK(t, root, "dpkg-deb", "-x", deb, root)
	}
	t.Run("packages lay down the binaries, units and configuration", func(t *testing.T) {
		for _, f := range []string{
			"usr/bin/vigil", "usr/lib/vigil/plugins/vigil-source-direct", "usr/lib/vigil/plugins/vigil-source-node",
			"usr/lib/vigil/plugins/vigil-source-dnspup", "lib/systemd/system/vigil.service", "etc/vigil/vigil.hcl",
			"usr/share/doc/vigil/copyright", "usr/share/doc/vigil/production.md",
			"usr/bin/vigil-node", "lib/systemd/system/vigil-node.service", "etc/vigil/vigil-node.env", "usr/share/doc/vigil-node/copyright",
		} {
			if _, err := os.Stat(filepath.Join(root, f)); err != nil {
				t.Errorf("the packages lack /%s: %v", f, err)
			}
		}
		got := strings.TrimSpace(runOK(t, root, filepath.Join(root, "usr/bin/vigil"), "version"))
		if !strings.HasPrefix(got, "vigil "+version+" ") {
			t.Errorf("vigil version from the package = %q, want version %s", got, version)
		}
		for pkg, conf := range map[string]string{"vigil": "/etc/vigil/vigil.hcl", "vigil-node": "/etc/vigil/vigil-node.env"} {
			ctl := t.TempDir()
			runOK(t, root, "dpkg-deb", "-e", debs[pkg], ctl)
			b, err := os.ReadFile(filepath.Join(ctl, "conffiles"))
			if err != nil || strings.TrimSpace(string(b)) != conf {
				t.Errorf("%s's conffiles = %q (%v), want %s", pkg, b, err, conf)
			}
			info := runOK(t, root, "dpkg-deb", "-f", debs[pkg], "Version", "Architecture", "License")
			if !strings.Contains(info, "Version: "+debVersion) || !strings.Contains(info, "Architecture: amd64") {
				t.Errorf("%s's control fields:\n%s", pkg, info)
			}
		}
	})

	t.Run("units verify and are hardened", func(t *testing.T) {
		// systemd-analyze verify --root needs the targets the units name
		// and the commands they run: the host's, copied into the root.
		sys := filepath.Join(root, "lib/systemd/system")
		for _, pattern := range []string{"/lib/systemd/system/*.target", "/lib/systemd/system/*.slice"} {
			matches, _ := filepath.Glob(pattern)
			for _, m := range matches {
				if b, err := os.ReadFile(m); err == nil {
					_ = os.WriteFile(filepath.Join(sys, filepath.Base(m)), b, 0o644)
				}
			}
		}
		if kill, err := os.ReadFile("/bin/kill"); err == nil {
			_ = os.MkdirAll(filepath.Join(root, "bin"), 0o755)
			_ = os.WriteFile(filepath.Join(root, "bin/kill"), kill, 0o755)
		}
		for _, unit := range []string{"vigil.service", "vigil-node.service"} {
			t.Run(unit, func(t *testing.T) {
				cmd := exec.Command("systemd-analyze", "verify", "--man=no", "--root="+root, "/lib/systemd/system/"+unit)
				b, err := cmd.CombinedOutput()
				// A warning (an unknown key, say) is a failure too.
				if err != nil || len(bytes.TrimSpace(b)) > 0 {
					t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, b)
				}
				text, err := os.ReadFile(filepath.Join(sys, unit))
				if err != nil {
					t.Fatal(err)
				}
				for _, want := range []string{"DynamicUser=yes", "StateDirectory=", "ProtectSystem=strict", "NoNewPrivileges=yes"} {
					if !bytes.Contains(text, []byte("\n"+want)) {
						t.Errorf("%s lacks %s", unit, want)
					}
				}
				if unit == "vigil.service" && !bytes.Contains(text, []byte("\nExecReload=/bin/kill -HUP $MAINPID")) {
					t.Errorf("%s lacks ExecReload sending HUP", unit)
				}
			})
		}
	})

	t.Run("the default configuration validates", func(t *testing.T) {
		// Its absolute paths moved into the scratch root.
		b, err := os.ReadFile(filepath.Join(root, "etc/vigil/vigil.hcl"))
		if err != nil {
			t.Fatal(err)
		}
		conf := strings.NewReplacer(`"/var/lib/vigil"`, `"`+filepath.Join(root, "var/lib/vigil")+`"`,
			`"/usr/lib/vigil/plugins"`, `"`+filepath.Join(root, "usr/lib/vigil/plugins")+`"`).Replace(string(b))
		if conf == string(b) {
			t.Fatalf("the default configuration names neither /var/lib/vigil nor /usr/lib/vigil/plugins:\n%s", b)
		}
		path := filepath.Join(t.TempDir(), "vigil.hcl")
		if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		runOK(t, root, filepath.Join(root, "usr/bin/vigil"), "validate", "-offline", path)
	})

	t.Run("container image root", func(t *testing.T) {
		ctx := filepath.Join(out, "container", "linux_amd64")
		for f, mode := range map[string]fs.FileMode{
			"Dockerfile": 0o644, "rootfs/usr/bin/vigil": 0o755, "rootfs/usr/lib/vigil/plugins/vigil-source-direct": 0o755,
			"rootfs/etc/vigil/vigil.hcl": 0o644, "rootfs/etc/ssl/certs/ca-certificates.crt": 0o644, "rootfs/etc/passwd": 0o644,
		} {
			st, err := os.Stat(filepath.Join(ctx, f))
			if err != nil {
				t.Errorf("the image context lacks %s: %v", f, err)
				continue
			}
			if st.Mode().Perm() != mode {
				t.Errorf("%s has mode %v, want %v", f, st.Mode().Perm(), mode)
			}
		}
		assertStatic(t, filepath.Join(ctx, "rootfs/usr/bin/vigil"))
		docker, err := os.ReadFile(filepath.Join(ctx, "Dockerfile"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"\nFROM scratch\n", "\nUSER 65532:65532\n", "\nHEALTHCHECK ", `"healthcheck"`} {
			if !bytes.Contains(docker, []byte(want)) {
				t.Errorf("the Dockerfile lacks %q", want)
			}
		}
		need(t, "buildah")
		tag := "localhost/vigil-dist-test:" + strings.ReplaceAll(filepath.Base(out), "/", "")
		runOK(t, ctx, "buildah", "bud", "-q", "--format", "docker", "--isolation", "chroot", "--pull=never", "-t", tag, ctx)
		t.Cleanup(func() { _ = exec.Command("buildah", "rmi", "-f", tag).Run() })
		cfg := runOK(t, ctx, "buildah", "inspect", "--type", "image", "--format",
			"{{.Docker.Config.User}}|{{.Docker.Config.Healthcheck.Test}}|{{.Docker.Config.Entrypoint}}", tag)
		if want := "65532:65532|[CMD /usr/bin/vigil healthcheck -address http://127.0.0.1:8470]|[/usr/bin/vigil agent]"; strings.TrimSpace(cfg) != want {
			t.Errorf("image config = %q, want %q", strings.TrimSpace(cfg), want)
		}
		c := strings.TrimSpace(runOK(t, ctx, "buildah", "from", "--pull=never", tag))
		t.Cleanup(func() { _ = exec.Command("buildah", "rm", c).Run() })
		mnt := strings.TrimSpace(runOK(t, ctx, "buildah", "mount", c))
		t.Cleanup(func() { _ = exec.Command("buildah", "umount", c).Run() })
		if got := runOK(t, ctx, filepath.Join(mnt, "usr/bin/vigil"), "version"); !strings.HasPrefix(got, "vigil "+version+" ") {
			t.Errorf("vigil version in the image = %q", got)
		}
		for _, d := range []string{"var/lib/vigil", "tmp"} {
			out := runOK(t, ctx, "stat", "-c", "%u:%g", filepath.Join(mnt, d))
			if strings.TrimSpace(out) != "65532:65532" {
				t.Errorf("/%s in the image is owned by %s, want the service's user 65532:65532", d, strings.TrimSpace(out))
			}
		}
	})
}

// assertStatic fails when the ELF file at path asks for a dynamic loader.
func assertStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked (it has an ELF interpreter): build with CGO_ENABLED=0", path)
		}
	}
}
