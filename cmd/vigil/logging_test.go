package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

func TestJSONLogsWriteDurationsAsText(t *testing.T) {
	var buf bytes.Buffer
	log := durationsAsText(hclog.New(&hclog.LoggerOptions{Output: &buf, JSONFormat: true, Level: hclog.Trace}))
	log.Info("started", "round_interval", 2*time.Second, "sites", 3)
	log.With("timeout", 1500*time.Millisecond).Named("dns").Warn("slow")
	log.ResetNamed("x").Log(hclog.Error, "late", "by", time.Minute)
	out := buf.String()
	for _, want := range []string{`"round_interval":"2s"`, `"sites":3`, `"timeout":"1.5s"`, `"@module":"dns"`, `"by":"1m0s"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "2000000000") {
		t.Errorf("a duration was logged as nanoseconds:\n%s", out)
	}
}
