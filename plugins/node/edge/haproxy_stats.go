package edge

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// ServerStats are one HAProxy server's counters, a line of the Runtime
// API's `show stat` (HAProxy's CSV statistics), as vigil-node's passive
// windows read them. Every counter counts from the start of the HAProxy
// process, or from the server's creation (add server).
type ServerStats struct {
	// Backend and Server are pxname and svname.
	Backend, Server string
	// ID is the server's id (sid): a server deleted and added again under
	// the same name gets another one, and its counters start again.
	ID int
	// Hrsp are the server's HTTP responses by class: Hrsp[0] is hrsp_1xx,
	// ... Hrsp[4] hrsp_5xx. HAProxy's own error pages (a 502 or 504 it
	// writes after a response error) are not in them.
	Hrsp [5]uint64
	// HrspOther counts the responses of another status (hrsp_other).
	HrspOther uint64
	// Econ counts the requests whose last connection to the server failed
	// (econ); Eresp the responses that failed: the server closed the
	// connection or timed out before a whole response (eresp); Wretr the
	// connection attempts retried after a failure (wretr).
	Econ, Eresp, Wretr uint64
	// Status is the server's status (UP, DOWN, MAINT, no check...).
	Status string
}

// statColumns are the show stat columns ServerStats needs.
var statColumns = []string{"pxname", "svname", "sid", "type", "hrsp_1xx", "hrsp_2xx", "hrsp_3xx", "hrsp_4xx", "hrsp_5xx", "hrsp_other", "econ", "eresp", "wretr", "status"}

// statTypeServer is show stat's type of a server line.
const statTypeServer = "2"

// ParseStat reads the answer to `show stat` (its CSV, header first) and
// returns its servers' lines; frontends, backends and listeners are left
// out. An empty counter (HAProxy leaves the ones that do not apply empty)
// reads as 0.
func ParseStat(text string) ([]ServerStats, error) {
	header, body, _ := strings.Cut(text, "\n")
	header = strings.TrimSpace(header)
	if !strings.HasPrefix(header, "# ") {
		return nil, fmt.Errorf("haproxy: show stat did not begin with its header: %.200q", text)
	}
	col := map[string]int{}
	for i, name := range strings.Split(strings.TrimPrefix(header, "# "), ",") {
		if _, dup := col[name]; !dup && name != "" {
			col[name] = i
		}
	}
	for _, c := range statColumns {
		if _, ok := col[c]; !ok {
			return nil, fmt.Errorf("haproxy: show stat has no %s column (HAProxy 1.8 or later has every one vigil-node reads)", c)
		}
	}
	r := csv.NewReader(strings.NewReader(body))
	r.FieldsPerRecord = -1
	r.ReuseRecord = true
	var out []ServerStats
	for line := 2; ; line++ {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("haproxy: show stat line %d: %w", line, err)
		}
		if len(rec) == 1 && strings.TrimSpace(rec[0]) == "" {
			continue
		}
		field := func(c string) string {
			if i := col[c]; i < len(rec) {
				return rec[i]
			}
			return ""
		}
		if field("type") != statTypeServer {
			continue
		}
		s := ServerStats{Backend: field("pxname"), Server: field("svname"), Status: field("status")}
		var errs []error
		num := func(c string) uint64 {
			f := field(c)
			if f == "" {
				return 0
			}
			n, err := strconv.ParseUint(f, 10, 64)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s %q is not a counter", c, f))
			}
			return n
		}
		s.ID = int(min(num("sid"), 1<<31-1))
		for i, c := range []string{"hrsp_1xx", "hrsp_2xx", "hrsp_3xx", "hrsp_4xx", "hrsp_5xx"} {
			s.Hrsp[i] = num(c)
		}
		s.HrspOther, s.Econ, s.Eresp, s.Wretr = num("hrsp_other"), num("econ"), num("eresp"), num("wretr")
		if len(errs) > 0 {
			return nil, fmt.Errorf("haproxy: show stat line %d (%s/%s): %w", line, s.Backend, s.Server, errors.Join(errs...))
		}
		out = append(out, s)
	}
	return out, nil
}

// Stats asks HAProxy for its servers' counters (show stat, servers only)
// and says which process answered (its pid and start time, as Watch
// tells them apart): a new process's counters start from 0.
//
// It leaves the driver's own record of the process alone: Watch alone
// tells the Hub of a new process, to apply the publication again.
func (h *HAProxy) Stats(ctx context.Context) (proc string, servers []ServerStats, err error) {
	// The process first: counters read from a newer one than named would
	// be taken for deltas of the old one's.
	info, err := h.Command(ctx, "show info")
	if err != nil {
		return "", nil, err
	}
	if proc = processOf(info); proc == "" {
		return "", nil, fmt.Errorf("haproxy: show info gave no Pid: %.200q", info)
	}
	// -1 4 -1: every proxy, servers only (4), every server.
	out, err := h.Command(ctx, "show stat -1 4 -1")
	if err != nil {
		return "", nil, err
	}
	servers, err = ParseStat(out)
	return proc, servers, err
}

// processOf is the process that answered show info, as process names it:
// its pid and start time ("" when show info has no pid).
func processOf(info string) string {
	var pid, start string
	for _, l := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(l, ": ")
		if !ok {
			continue
		}
		switch v = strings.TrimSpace(v); k {
		case "Pid":
			pid = v
		case "Start_time_sec":
			start = v
		}
	}
	if pid == "" {
		return ""
	}
	return pid + "@" + start
}

// Outcomes are the requests an HAProxy server answered between two reads
// of its counters, as a passive window counts them.
type Outcomes struct {
	// OK are the 1xx to 4xx responses (a 429 among them).
	OK uint64
	// Status5xx are the 5xx responses of the server itself.
	Status5xx uint64
	// Errors are the failed connection attempts (econ and wretr) and the
	// failed responses (eresp): the server never answered.
	Errors uint64
}

// Total is every outcome.
func (o Outcomes) Total() uint64 { return o.OK + o.Status5xx + o.Errors }

// StatsTracker turns successive reads of the counters into the outcomes
// between them. The zero value is ready; it is not safe for concurrent
// use.
type StatsTracker struct {
	proc string
	prev map[[2]string]ServerStats
	// seen says a read was taken: servers that appear later count from 0
	// (HAProxy adds a server with zeroed counters).
	seen bool
}

// Resets counts the counters that started again, as Update found them.
type Resets struct {
	// Process: a new HAProxy process answered (a reload or a restart).
	Process bool
	// Servers are the servers whose counters went back (a server deleted
	// and added again, counters cleared with clear counters all).
	Servers int
}

// Update takes a read of the counters of process proc and returns each
// server's outcomes since the previous read, by "backend/server". The
// first read is a baseline: it counts nothing, as the counters hold what
// happened before vigil-node looked. After it, a server's counters count
// from 0 when the process changed (a reload or a restart), when its id
// changed, or when any of them went back (a delta that would be negative
// is a reset): its whole counters are then its outcomes since the reset.
// A server that appears counts from 0, and one that disappears is
// forgotten.
func (t *StatsTracker) Update(proc string, cur []ServerStats) (map[string]Outcomes, Resets) {
	var rs Resets
	out := map[string]Outcomes{}
	newProc := t.seen && proc != t.proc
	rs.Process = newProc
	next := make(map[[2]string]ServerStats, len(cur))
	for _, s := range cur {
		k := [2]string{s.Backend, s.Server}
		next[k] = s
		if !t.seen {
			continue
		}
		old, ok := t.prev[k]
		var d ServerStats
		switch {
		case !ok || newProc:
			d = s
		case old.ID != s.ID || wentBack(old, s):
			d = s
			rs.Servers++
		default:
			d = sub(s, old)
		}
		o := Outcomes{OK: d.Hrsp[0] + d.Hrsp[1] + d.Hrsp[2] + d.Hrsp[3], Status5xx: d.Hrsp[4], Errors: d.Econ + d.Eresp + d.Wretr}
		if o.Total() > 0 {
			out[s.Backend+"/"+s.Server] = o
		}
	}
	t.prev, t.proc, t.seen = next, proc, true
	return out, rs
}

// wentBack says a counter of cur is below old's.
func wentBack(old, cur ServerStats) bool {
	for i := range cur.Hrsp {
		if cur.Hrsp[i] < old.Hrsp[i] {
			return true
		}
	}
	return cur.HrspOther < old.HrspOther || cur.Econ < old.Econ || cur.Eresp < old.Eresp || cur.Wretr < old.Wretr
}

// sub is cur's counters less old's (none went back).
func sub(cur, old ServerStats) ServerStats {
	d := cur
	for i := range d.Hrsp {
		d.Hrsp[i] -= old.Hrsp[i]
	}
	d.HrspOther -= old.HrspOther
	d.Econ -= old.Econ
	d.Eresp -= old.Eresp
	d.Wretr -= old.Wretr
	return d
}

// ServerAddresses maps the HAProxy servers the driver names after v's
// origins ("backend/server", the backup server NAME:backup too) to the
// origins' addresses as published: what ties a server's counters to its
// origin's passive window.
func ServerAddresses(v *View) map[string]string {
	m := map[string]string{}
	add := func(be string, os []Origin) {
		for _, o := range os {
			m[be+"/"+o.Server] = o.Address
			m[be+"/"+o.Server+BackupSuffix] = o.Address
		}
	}
	for _, s := range v.Sites {
		add(s.Backend, s.Others)
		add(s.Backend, s.Backup)
		if s.Ramp != nil {
			add(s.Backend, s.Ramp.Origins)
		}
		add(s.Backend, s.Origins)
	}
	return m
}
