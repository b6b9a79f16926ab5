package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigilcdn/vigil/core/decide"
	"github.com/vigilcdn/vigil/core/store"
)

// stateFixture is a data_dir with three sites, one on a manual hold, and a
// last-good copy, as a stopped agent leaves it.
func stateFixture(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	s, err := store.OpenWith(dir, store.OpenOptions{BackupInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	b := store.Batch{Meta: store.Meta{Round: 9, LastEvent: 1, Publication: 4}, Events: []store.Event{{Seq: 1, Site: "www", Event: decide.Event{Kind: decide.KindFailbackAvailable, Level: 1}}}}
	for _, name := range []string{"www", "api", "img"} {
		b.Sites = append(b.Sites, store.Site{Name: name, Level: 2, ManualHold: name == "www"})
	}
	if err := s.Commit(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Backup(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func runStateCmd(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestStateCommands damages the state file, checks it, restores it and
// reopens it: the sites and the manual hold are back.
func TestStateCommands(t *testing.T) {
	dir := stateFixture(t)
	cfg := filepath.Join(t.TempDir(), "vigil.hcl")
	os.WriteFile(cfg, []byte("control {\n  data_dir = \""+dir+"\"\n}\n"+stateTestConfig), 0o600)
	path := filepath.Join(dir, store.FileName)
	steps := []struct {
		name   string
		args   []string
		before func()
		code   int
		stdout []string
		stderr []string
	}{
		{"check sound", []string{"state", "check", "-data-dir", dir}, nil, 0,
			[]string{"vigil.db: sound", "sites           3", "journal         1 events (1 to 1)", "last round      9", "publication     version 4", "last-good copy  " + filepath.Join(dir, store.GoodFileName)}, nil},
		{"check via -config", []string{"state", "check", "-config", cfg}, nil, 0, []string{"sites           3"}, nil},
		{"cut in half", []string{"state", "check", "-data-dir", dir}, func() {
			st, _ := os.Stat(path)
			os.Truncate(path, st.Size()/2)
		}, 1, nil, []string{path + " is damaged", "it was cut short", "vigil state restore -data-dir " + dir, "-fresh-state"}},
		{"restore", []string{"state", "restore", "-config", cfg}, nil, 0,
			[]string{"passed the full check: 3 sites, round 9, publication 4", "moved the damaged " + path + " aside as " + path + ".damaged-", "restored " + path}, nil},
		{"check after restore", []string{"state", "check", "-data-dir", dir}, nil, 0, []string{"sites           3"}, nil},
		{"empty file", []string{"state", "check", "-data-dir", dir}, func() { os.Truncate(path, 0) }, 1, nil, []string{"is empty (0 bytes)", "vigil state restore"}},
		{"restore from a file", []string{"state", "restore", "-data-dir", dir, "-from", filepath.Join(dir, store.GoodFileName)}, nil, 0, []string{"moved the damaged"}, nil},
		{"restore from a damaged file", []string{"state", "restore", "-data-dir", dir, "-from", cfg}, nil, 1, nil, []string{"skipped " + cfg, "no copy passes the check", "nothing was changed"}},
		{"missing file", []string{"state", "check", "-data-dir", dir}, func() { os.Rename(path, path+".away") }, 1, nil, []string{path + " is missing although"}},
		{"no state at all", []string{"state", "check", "-data-dir", t.TempDir()}, nil, 1, nil, []string{"no agent has kept state in this data_dir yet"}},
		{"no copy to restore", []string{"state", "restore", "-data-dir", t.TempDir()}, nil, 1, nil, []string{"holds no last-good copy", "nothing was changed"}},
		{"no subcommand", []string{"state"}, nil, 2, nil, []string{"give a subcommand: check, restore"}},
		{"unknown subcommand", []string{"state", "fix"}, nil, 2, nil, []string{`unknown subcommand "fix"`}},
		{"both flags", []string{"state", "check", "-data-dir", dir, "-config", cfg}, nil, 2, nil, []string{"not both"}},
		{"stray argument", []string{"state", "check", "extra"}, nil, 2, nil, []string{`unexpected argument "extra"`}},
		{"bad flag", []string{"state", "restore", "-bogus"}, nil, 2, nil, []string{"unknown flag -bogus", "vigil state restore -h"}},
		{"bad config", []string{"state", "check", "-config", filepath.Join(dir, "nope.hcl")}, nil, 2, nil, []string{"is not valid"}},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			if s.before != nil {
				s.before()
			}
			code, out, errb := runStateCmd(s.args...)
			ok := code == s.code
			for _, w := range s.stdout {
				ok = ok && strings.Contains(out, w)
			}
			for _, w := range s.stderr {
				ok = ok && strings.Contains(errb, w)
			}
			if !ok {
				t.Fatalf("exit %d (want %d)\nstdout:\n%s\nstderr:\n%s\nwant stdout %q, stderr %q", code, s.code, out, errb, s.stdout, s.stderr)
			}
		})
	}
}

func TestStateRestoreBringsTheSitesBack(t *testing.T) {
	dir := stateFixture(t)
	path := filepath.Join(dir, store.FileName)
	b, _ := os.ReadFile(path)
	clear(b[:8192]) // both header pages
	os.WriteFile(path, b, 0o600)
	if _, err := store.Open(dir, 0); err == nil || !strings.Contains(err.Error(), "vigil state restore") {
		t.Fatalf("open of a damaged file: %v", err)
	}
	if code, out, errb := runStateCmd("state", "restore", "-data-dir", dir); code != 0 {
		t.Fatalf("restore: exit %d\n%s%s", code, out, errb)
	}
	s, err := store.Open(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Load(context.Background())
	if err != nil || len(st.Sites) != 3 || !st.Sites["www"].ManualHold || st.Meta.Round != 9 {
		t.Fatalf("after restore: %+v %v", st, err)
	}
	kept, _ := filepath.Glob(path + ".damaged-*")
	if len(kept) != 1 {
		t.Fatalf("the damaged file was not kept: %v", kept)
	}
}

func TestStateRefusedWhileAnAgentRuns(t *testing.T) {
	dir := stateFixture(t)
	s, err := store.Open(dir, 0) // holds the lock, as a running agent does
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, sub := range []string{"check", "restore"} {
		code, _, errb := runStateCmd("state", sub, "-data-dir", dir)
		if code != 1 || !strings.Contains(errb, "in use by a running agent") {
			t.Fatalf("state %s while in use: exit %d, %s", sub, code, errb)
		}
	}
	if kept, _ := filepath.Glob(filepath.Join(dir, store.FileName+".damaged-*")); len(kept) != 0 {
		t.Fatalf("restore moved a file while refused: %v", kept)
	}
}

func TestStateEtcdConfigRefused(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "vigil.hcl")
	os.WriteFile(cfg, []byte("control {\n  store \"etcd\" {\n    endpoints = [\"http://127.0.0.1:2379\"]\n  }\n}\n"+stateTestConfig), 0o600)
	code, _, errb := runStateCmd("state", "check", "-config", cfg)
	if code != 2 || !strings.Contains(errb, "keeps the state in etcd") {
		t.Fatalf("etcd config: exit %d, %s", code, errb)
	}
}

const stateTestConfig = `
source "direct" { plugin = "vigil-source-direct" }
site "www" {
  hostname = "www.example.com"
  origin "a1" { address = "http://127.0.0.1:18001" }
  origin "a2" { address = "http://127.0.0.1:18002" }
}
`
