package agent

import (
	"errors"
	"fmt"
	"net"
	"reflect"
	"runtime/debug"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/prometheus/client_golang/prometheus"

	vapi "github.com/vigilcdn/vigil/api"

	"github.com/vigilcdn/vigil/core/config"
)

// ReloadResult says what a reload did.
type ReloadResult struct {
	// Applied names what changed and is in force now.
	Applied []string
	// NeedRestart names the settings that changed but take effect only
	// at the next start; their old values stay in force until then.
	NeedRestart []string
	// Failed says what could not be applied; the old part stays.
	Failed []error
}

// ErrReloadRefused wraps the error of a reload that changed nothing.
var ErrReloadRefused = errors.New("configuration not reloaded; the old one stays in force")

// InvalidConfigError is a reload refused because the configuration file
// is not valid; it wraps ErrReloadRefused.
type InvalidConfigError struct {
	// Path is the configuration that was read.
	Path string
	// Errors counts the error diagnostics.
	Errors int
	// Diagnostics are the diagnostics as text, with file:line and a
	// source snippet under each.
	Diagnostics string
}

func (e *InvalidConfigError) Error() string {
	return fmt.Sprintf("%v: %s is not valid (%d errors); fix it and reload again", ErrReloadRefused, e.Path, e.Errors)
}

// Unwrap makes errors.Is(err, ErrReloadRefused) true.
func (e *InvalidConfigError) Unwrap() error { return ErrReloadRefused }

// ReloadFile reads the configuration again from Options.ConfigPath and
// applies it with Reload: what SIGHUP, `vigil reload` and POST /v1/reload
// do. by says who asked ("SIGHUP", "api"), for the log. An invalid
// configuration is refused: its diagnostics are written to
// Options.Diagnostics (or logged, with Options.JSONDiagnostics), the
// refusal is logged, vigil_config_last_reload_successful drops to 0, and
// the error is an *InvalidConfigError. Reloads run one at a time.
func (a *Agent) ReloadFile(by string) (ReloadResult, error) {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	a.log.Info("reloading configuration", "config", a.opts.ConfigPath, "by", by)
	cfg, diags := config.LoadCached(a.opts.ConfigPath)
	if diags.HasErrors() {
		// The diagnostics first, then the line that sums them up: a reader
		// of the log (or a script waiting for that line) has them all.
		var b strings.Builder
		_ = config.WriteDiagnostics(&b, cfg.Files, diags)
		a.diagnose(cfg.Files, diags)
		a.mu.Lock()
		a.metrics.reloaded(false)
		a.mu.Unlock()
		a.log.Error("configuration not reloaded: it is invalid; the old one stays in force", "errors", len(diags.Errs()))
		return ReloadResult{}, &InvalidConfigError{Path: a.opts.ConfigPath, Errors: len(diags.Errs()), Diagnostics: b.String()}
	}
	if len(diags) > 0 {
		a.diagnose(cfg.Files, diags)
	}
	a.mu.Lock()
	unchanged := config.Unchanged(a.cfg, cfg)
	a.mu.Unlock()
	res, err := a.Reload(cfg)
	if err == nil && !unchanged && len(cfg.Sites) >= bigRound {
		// A large reload leaves tens of megabytes behind (the files
		// read, the cache written, the fleet it replaced): give them back
		// to the system now, as a large round does, so that what the
		// agent holds after a reload is what a fresh start holds.
		debug.FreeOSMemory()
	}
	if err != nil {
		if errors.Is(err, ErrReloadRefused) {
			a.log.Error(err.Error())
		} else {
			a.log.Error("configuration not reloaded", "error", err)
		}
	}
	return res, err
}

// reloadAPI is POST /v1/reload: ReloadFile, answered as the API's types.
func (a *Agent) reloadAPI() (vapi.ReloadAnswer, error) {
	res, err := a.ReloadFile("api")
	ans := vapi.ReloadAnswer{Reloaded: err == nil && len(res.Failed) == 0, Applied: res.Applied, NeedRestart: res.NeedRestart}
	for _, f := range res.Failed {
		ans.Failed = append(ans.Failed, f.Error())
	}
	if ice := (*InvalidConfigError)(nil); errors.As(err, &ice) {
		return ans, &vapi.Error{Code: vapi.CodeReloadRefused, Message: ice.Error() + "\n" + strings.TrimRight(ice.Diagnostics, "\n")}
	}
	if err != nil {
		return ans, &vapi.Error{Code: vapi.CodeReloadRefused, Message: err.Error()}
	}
	return ans, nil
}

// diagnose reports diagnostics: as text with source snippets to
// Options.Diagnostics, or one log record each with JSONDiagnostics.
func (a *Agent) diagnose(files map[string]*hcl.File, diags hcl.Diagnostics) {
	if a.opts.JSONDiagnostics {
		LogDiagnostics(a.log, diags)
		return
	}
	_ = config.WriteDiagnostics(a.opts.Diagnostics, files, diags)
}

// LogDiagnostics logs each diagnostic as one record of log: an error or
// a warning with its summary, detail and file:line:col. It is how a
// JSON log (-log-json) carries diagnostics, one JSON line each, where the
// text form would write a snippet over several raw lines.
func LogDiagnostics(log hclog.Logger, diags hcl.Diagnostics) {
	for _, d := range diags {
		args := []any{"summary", d.Summary}
		if d.Subject != nil {
			args = append(args, "at", fmt.Sprintf("%s:%d:%d", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column))
		}
		if d.Detail != "" {
			args = append(args, "detail", d.Detail)
		}
		if d.Severity == hcl.DiagError {
			log.Error("configuration error", args...)
		} else {
			log.Warn("configuration warning", args...)
		}
	}
}

// Reload applies cfg: the API token and read access, the API listener
// (moved: the new address is bound before anything changes), the sources
// and sites, round_interval and sites_per_round, the notifiers and the DNS
// publisher. A reload that cannot bind the new listener, read the new
// token, or start a changed source changes nothing and returns an error
// wrapping ErrReloadRefused. Settings that only a restart can change
// (data_dir, the store) are named in NeedRestart and keep their old
// values.
func (a *Agent) Reload(cfg *config.Config) (ReloadResult, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.cfg
	var res ReloadResult
	res.NeedRestart = needRestart(old, cfg)
	tokens, err := readTokens(cfg.Control.API)
	if err != nil {
		a.metrics.reloaded(false)
		return res, fmt.Errorf("%w: %v", ErrReloadRefused, err)
	}
	// The API's certificate is read again at every reload, so that a
	// renewed one (same paths, new files) takes effect.
	prevTLS := a.tls.current()
	if err := a.tls.set(cfg.Control.API.TLS); err != nil {
		a.metrics.reloaded(false)
		return res, fmt.Errorf("%w: %v", ErrReloadRefused, err)
	}
	var ln net.Listener
	if cfg.Control.API.Listen != old.Control.API.Listen {
		if ln, err = listen(cfg.Control.API.Listen); err != nil {
			a.tls.put(prevTLS)
			a.metrics.reloaded(false)
			return res, fmt.Errorf("%w: %v", ErrReloadRefused, err)
		}
	}
	// A SIGHUP of an unchanged file hands back the very sites and sources
	// in force (config.Unchanged): the engine keeps what it built from
	// them. The tokens and the certificate above are read again all the
	// same.
	if config.Unchanged(old, cfg) {
		res.Applied = append(res.Applied, "sites and sources kept: the configuration is unchanged")
	} else if d := a.engine.Reload(a.ctx, cfg); d.HasErrors() {
		if ln != nil {
			ln.Close()
		}
		a.tls.put(prevTLS)
		a.diagnose(cfg.Files, d)
		a.metrics.reloaded(false)
		return res, fmt.Errorf("%w: a vote source could not start (the diagnostics say why)", ErrReloadRefused)
	}
	res.Applied = append(res.Applied, changedControl(old, cfg)...)
	readsNeedToken := cfg.Control.API.ReadAccess == "token"
	if a.tokens != tokens || (old.Control.API.ReadAccess == "token") != readsNeedToken {
		a.api.SetTokens(tokens, readsNeedToken)
		a.tokens = tokens
		res.Applied = append(res.Applied, "control { api { tokens, read_access } }")
	}
	if t := cfg.Control.API.TLS; t != nil {
		res.Applied = append(res.Applied, "control { api { tls } } (certificate read again)")
	} else if prevTLS != nil {
		res.Applied = append(res.Applied, "control { api { tls } } removed: the API serves plain http")
	}
	if ln != nil {
		a.serve(ln)
		res.Applied = append(res.Applied, "control { api { listen = "+fmt.Sprintf("%q", cfg.Control.API.Listen)+" } }")
	}
	applied, failed := a.parts.reload(a.ctx, a.engine, cfg)
	res.Applied = append(res.Applied, applied...)
	res.Failed = append(res.Failed, failed...)
	a.cluster.setConfig(cfg)
	a.cfg = cfg
	cfg.ForgetText()
	a.metrics.reloaded(len(res.Failed) == 0)
	a.metrics.needRestart(len(res.NeedRestart) > 0)
	a.logReload(res)
	warnScale(a.log, cfg, a.limited)
	return res, nil
}

// needRestart names the settings that changed from old to cfg but take
// effect only at a restart, with what stays in force meanwhile.
func needRestart(old, cfg *config.Config) []string {
	var out []string
	if cfg.Control.DataDir != old.Control.DataDir {
		out = append(out, fmt.Sprintf("control { data_dir } (%q stays in force until a restart)", old.Control.DataDir))
	}
	if cfg.Control.HistoryRounds != old.Control.HistoryRounds {
		out = append(out, fmt.Sprintf("control { history { rounds } } (%d rounds now, from keep / round_interval when not set; the history file keeps %d until a restart, which copies it into one of the new size, its records kept)",
			cfg.Control.HistoryRounds, old.Control.HistoryRounds))
	}
	if !sameStore(old.Control.Store, cfg.Control.Store) {
		out = append(out, "control { store } (the state store stays as it is until a restart)")
	}
	if ec := old.Control.Store; ec != nil && cfg.Control.API.Listen != old.Control.API.Listen {
		// The address other instances send operators to, and the
		// instance's ID, are made from api.listen at start when unset.
		var made []string
		if ec.Advertise == "" {
			made = append(made, "advertise")
		}
		if ec.ID == "" {
			made = append(made, "id")
		}
		if len(made) > 0 {
			out = append(out, fmt.Sprintf("store \"etcd\" { %s }, made from the old api { listen } at start (set them in the store block so that the listener can move without a restart)", strings.Join(made, ", ")))
		}
	}
	return out
}

// changedControl names the sources, sites and round settings that changed.
func changedControl(old, cfg *config.Config) []string {
	var out []string
	if old.Control.RoundInterval != cfg.Control.RoundInterval {
		out = append(out, fmt.Sprintf("round_interval %s", cfg.Control.RoundInterval))
	}
	if old.Control.SitesPerRound != cfg.Control.SitesPerRound || old.Control.SitesPerRoundAuto != cfg.Control.SitesPerRoundAuto {
		if cfg.Control.SitesPerRoundAuto {
			out = append(out, "sites_per_round auto")
		} else {
			out = append(out, fmt.Sprintf("sites_per_round %d", cfg.Control.SitesPerRound))
		}
	}
	out = append(out, fmt.Sprintf("sources and sites (%d sources, %d sites)", len(cfg.Sources), len(cfg.Sites)))
	return out
}

func sameStore(a, b *config.EtcdStore) bool {
	if a == nil || b == nil {
		return a == b
	}
	x, y := *a, *b
	x.DeclRange = y.DeclRange
	return reflect.DeepEqual(x, y)
}

// logReload says exactly what the reload did: never "reloaded" over a
// setting it did not apply.
func (a *Agent) logReload(res ReloadResult) {
	args := []any{"config", a.opts.ConfigPath, "applied", strings.Join(res.Applied, "; ")}
	switch {
	case len(res.Failed) > 0:
		msgs := make([]string, len(res.Failed))
		for i, e := range res.Failed {
			msgs[i] = e.Error()
		}
		a.log.Error("configuration reloaded in part: some parts could not be applied and keep their old settings",
			append(args, "failed", strings.Join(msgs, "; "), "need_restart", strings.Join(res.NeedRestart, "; "))...)
	case len(res.NeedRestart) > 0:
		a.log.Warn("configuration reloaded, except settings that need a restart: they keep their old values until then",
			append(args, "need_restart", strings.Join(res.NeedRestart, "; "))...)
	default:
		a.log.Info("configuration reloaded", args...)
	}
}

// reloadMetrics are Prometheus's own reload series, for vigil.
type reloadMetrics struct {
	ok      prometheus.Gauge
	at      prometheus.Gauge
	restart prometheus.Gauge
}

func newReloadMetrics(reg prometheus.Registerer) *reloadMetrics {
	m := &reloadMetrics{
		ok: prometheus.NewGauge(prometheus.GaugeOpts{Name: "vigil_config_last_reload_successful",
			Help: "1 when the last configuration (re)load applied everything it could, 0 when it was refused or failed in part."}),
		at: prometheus.NewGauge(prometheus.GaugeOpts{Name: "vigil_config_last_reload_success_timestamp_seconds",
			Help: "When the configuration was last (re)loaded successfully, in Unix seconds."}),
		restart: prometheus.NewGauge(prometheus.GaugeOpts{Name: "vigil_config_restart_required",
			Help: "1 when a reloaded setting (such as data_dir) takes effect only at the next start."}),
	}
	reg.MustRegister(m.ok, m.at, m.restart)
	return m
}

func (m *reloadMetrics) reloaded(ok bool) {
	if ok {
		m.ok.Set(1)
		m.at.Set(float64(time.Now().UnixNano()) / 1e9)
	} else {
		m.ok.Set(0)
	}
}

func (m *reloadMetrics) needRestart(yes bool) {
	if yes {
		m.restart.Set(1)
	} else {
		m.restart.Set(0)
	}
}
