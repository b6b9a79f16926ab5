package config

import "testing"

func TestConfigDigestIsTheMeaning(t *testing.T) {
	base := "\n  listen = \"127.0.0.1:8471\"\n  nodes_per_round = 3\n  labels = [\"a\", \"b\"]\n"
	tests := []struct {
		name, text string
		same       bool
	}{
		{"a comment", base + "  # the gateway\n", true},
		{"spacing and order", "labels=[\"a\",\"b\"]\nnodes_per_round   = 3\nlisten = \"127.0.0.1:8471\"", true},
		{"3.0 for 3", "\n  listen = \"127.0.0.1:8471\"\n  nodes_per_round = 3.0\n  labels = [\"a\", \"b\"]\n", true},
		{"a value", "\n  listen = \"127.0.0.1:8472\"\n  nodes_per_round = 3\n  labels = [\"a\", \"b\"]\n", false},
		{"a list's order", "\n  listen = \"127.0.0.1:8471\"\n  nodes_per_round = 3\n  labels = [\"b\", \"a\"]\n", false},
		{"a new attribute", base + "  online_timeout = \"6s\"\n", false},
		{"a string for a number", "\n  listen = \"127.0.0.1:8471\"\n  nodes_per_round = \"3\"\n  labels = [\"a\", \"b\"]\n", false},
		{"a block", base + "  tls {\n    cert = \"c\"\n  }\n", false},
		{"text that does not parse", base + "  = oops\n", false},
	}
	want := (&Source{ConfigText: base}).ConfigDigest()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := (&Source{ConfigText: tt.text}).ConfigDigest()
			if (got == want) != tt.same {
				t.Errorf("digest equal = %v, want %v", got == want, tt.same)
			}
		})
	}
	broken := "listen = oops(\n"
	if (&Source{ConfigText: broken}).ConfigDigest() == (&Source{ConfigText: broken + " "}).ConfigDigest() {
		t.Error("a block that does not parse must digest as its text: any edit is a change")
	}
}
