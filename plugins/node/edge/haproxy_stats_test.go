package edge

import (
	"bufio"
	"fmt"
	"net"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/vigilcdn/vigil/sdk/publication"
)

// statHeader is HAProxy 2.6's show stat header, as Debian's haproxy
// writes it.
const statHeader = "# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status,weight,act,bck,chkfail,chkdown,lastchg,downtime,qlimit,pid,iid,sid,throttle,lbtot,tracked,type,rate,rate_lim,rate_max,check_status,check_code,check_duration,hrsp_1xx,hrsp_2xx,hrsp_3xx,hrsp_4xx,hrsp_5xx,hrsp_other,hanafail,req_rate,req_rate_max,req_tot,cli_abrt,srv_abrt,comp_in,comp_out,comp_byp,comp_rsp,lastsess,last_chk,last_agt,qtime,ctime,rtime,ttime,agent_status,agent_code,agent_duration,check_desc,agent_desc,check_rise,check_fall,check_health,agent_rise,agent_fall,agent_health,addr,cookie,mode,algo,conn_rate,conn_rate_max,conn_tot,intercepted,dcon,dses,wrew,connect,reuse,cache_lookups,cache_hits,srv_icur,src_ilim,qtime_max,ctime_max,rtime_max,ttime_max,eint,idle_conn_cur,safe_conn_cur,used_conn_cur,need_conn_est,uweight,agg_server_status,agg_server_check_status,agg_check_status,-,ssl_sess,"

// statLine is a server line of statHeader's columns with the given
// counters, the others empty.
func statLine(be, srv string, sid int, econ, eresp, wretr uint64, hrsp [5]uint64) string {
	cols := strings.Split(strings.TrimPrefix(statHeader, "# "), ",")
	f := make([]string, len(cols))
	vals := map[string]string{"pxname": be, "svname": srv, "sid": strconv.Itoa(sid), "type": "2", "status": "UP",
		"econ": u(econ), "eresp": u(eresp), "wretr": u(wretr), "addr": "127.0.0.1:8080", "hrsp_other": "0"}
	for i, c := range []string{"hrsp_1xx", "hrsp_2xx", "hrsp_3xx", "hrsp_4xx", "hrsp_5xx"} {
		vals[c] = u(hrsp[i])
	}
	for i, c := range cols {
		f[i] = vals[c]
	}
	return strings.Join(f, ",")
}

func u(n uint64) string { return strconv.FormatUint(n, 10) }

func TestParseStat(t *testing.T) {
	// A frontend and a backend line are left out; a server line kept.
	text := statHeader + "\n" +
		"fe,FRONTEND,,,0,1,262119,4,82,217,0,0,0,,,,,OPEN,,,,,,,,,1,2,0,,,,0,0,0,1,,,,0,0,0,0,4,0,,0,1,4,,,0,0,0,0,,,,,,,,,,,,,,,,,,,,,http,,0,1,4,0,0,0,0,,,0,0,,,,,,,0,,,,,,-,0,\n" +
		statLine("www", "a1", 1, 2, 3, 4, [5]uint64{0, 10, 1, 5, 7}) + "\n" +
		"www,BACKEND,0,0,0,1,26212,4,82,217,0,0,,1,0,3,0,UP,1,1,0,,0,5,0,,1,3,0,,1,,1,0,,1,,,,0,0,0,0,0,0,,,,0,0,0,0,0,0,0,-1,,,0,0,0,0,,,,,,,,,,,,,,http,roundrobin,,,,,,,0,4,0,0,0,,,0,0,0,0,,,,,,,,,-,0,\n"
	got, err := ParseStat(text)
	if err != nil {
		t.Fatal(err)
	}
	want := []ServerStats{{Backend: "www", Server: "a1", ID: 1, Hrsp: [5]uint64{0, 10, 1, 5, 7}, Econ: 2, Eresp: 3, Wretr: 4, Status: "UP"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseStat = %+v, want %+v", got, want)
	}

	for _, tc := range []struct{ name, text, wantErr string }{
		{"no header", "www,a1,0\n", "did not begin with its header"},
		{"column missing", "# pxname,svname,type\nwww,a1,2\n", "no sid column"},
		{"bad quoting", statHeader + "\n\"www,a1\n", "show stat line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ParseStat(tc.text); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("ParseStat: %v, want an error with %q", err, tc.wantErr)
			}
		})
	}
	bad := strings.Replace(statLine("www", "a1", 1, 0, 0, 0, [5]uint64{0, 10, 0, 0, 0}), ",10,", ",-10,", 1)
	if _, err := ParseStat(statHeader + "\n" + bad + "\n"); err == nil || !strings.Contains(err.Error(), `hrsp_2xx "-10" is not a counter`) || !strings.Contains(err.Error(), "www/a1") {
		t.Fatalf("a negative counter: %v, want an error naming it and the server", err)
	}
}

func TestStatsTracker(t *testing.T) {
	srv := func(name string, sid int, ok, s5, econ, eresp, wretr uint64) ServerStats {
		return ServerStats{Backend: "www", Server: name, ID: sid, Hrsp: [5]uint64{0, ok, 0, 0, s5}, Econ: econ, Eresp: eresp, Wretr: wretr}
	}
	type step struct {
		proc   string
		cur    []ServerStats
		want   map[string]Outcomes
		resets Resets
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"baseline then deltas", []step{
			{"p1", []ServerStats{srv("a1", 1, 100, 10, 1, 0, 0)}, map[string]Outcomes{}, Resets{}},
			{"p1", []ServerStats{srv("a1", 1, 110, 15, 2, 1, 2)}, map[string]Outcomes{"www/a1": {OK: 10, Status5xx: 5, Errors: 4}}, Resets{}},
			{"p1", []ServerStats{srv("a1", 1, 110, 15, 2, 1, 2)}, map[string]Outcomes{}, Resets{}},
		}},
		{"a counter went back: reset", []step{
			{"p1", []ServerStats{srv("a1", 1, 100, 10, 0, 0, 0)}, map[string]Outcomes{}, Resets{}},
			{"p1", []ServerStats{srv("a1", 1, 120, 3, 0, 0, 0)}, map[string]Outcomes{"www/a1": {OK: 120, Status5xx: 3}}, Resets{Servers: 1}},
			{"p1", []ServerStats{srv("a1", 1, 121, 3, 0, 0, 0)}, map[string]Outcomes{"www/a1": {OK: 1}}, Resets{}},
		}},
		{"new process (reload): every counter from 0", []step{
			{"p1", []ServerStats{srv("a1", 1, 100, 10, 0, 0, 0)}, map[string]Outcomes{}, Resets{}},
			// Higher than before, yet a new process: counted whole.
			{"p2", []ServerStats{srv("a1", 1, 150, 12, 0, 0, 0)}, map[string]Outcomes{"www/a1": {OK: 150, Status5xx: 12}}, Resets{Process: true}},
		}},
		{"server added again (new id)", []step{
			{"p1", []ServerStats{srv("a1", 1000000001, 100, 0, 0, 0, 0)}, map[string]Outcomes{}, Resets{}},
			{"p1", []ServerStats{srv("a1", 1000000002, 200, 0, 0, 0, 0)}, map[string]Outcomes{"www/a1": {OK: 200}}, Resets{Servers: 1}},
		}},
		{"a server that appears counts from 0, one that leaves is forgotten", []step{
			{"p1", []ServerStats{srv("a1", 1, 5, 0, 0, 0, 0)}, map[string]Outcomes{}, Resets{}},
			{"p1", []ServerStats{srv("b1", 2, 3, 1, 0, 0, 0)}, map[string]Outcomes{"www/b1": {OK: 3, Status5xx: 1}}, Resets{}},
			{"p1", []ServerStats{srv("a1", 1, 7, 0, 0, 0, 0), srv("b1", 2, 3, 1, 0, 0, 0)}, map[string]Outcomes{"www/a1": {OK: 7}}, Resets{}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr StatsTracker
			for i, s := range tc.steps {
				got, rs := tr.Update(s.proc, s.cur)
				if !reflect.DeepEqual(got, s.want) || rs != s.resets {
					t.Fatalf("read %d: %+v %+v, want %+v %+v", i, got, rs, s.want, s.resets)
				}
			}
		})
	}
}

func TestServerAddresses(t *testing.T) {
	snap := &publication.Snapshot{Version: 3, Sites: []publication.Site{{
		Name: "www", Hostname: "www.example.com", Level: 1,
		Origins: []publication.Origin{{Name: "a 1", Address: "http://127.0.0.1:8081", State: "healthy"}},
		Backup:  &publication.Backup{Level: 2, Origins: []publication.Origin{{Name: "b1", Address: "127.0.0.1:8082", State: "healthy"}}},
	}}}
	v, _ := Build(snap, nil, "vigil_", nil)
	got := ServerAddresses(v)
	want := map[string]string{
		"vigil_www/a_1": "http://127.0.0.1:8081", "vigil_www/a_1:backup": "http://127.0.0.1:8081",
		"vigil_www/b1": "127.0.0.1:8082", "vigil_www/b1:backup": "127.0.0.1:8082",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ServerAddresses = %v, want %v", got, want)
	}
}

// fakeRuntime is a Runtime API on a unix socket answering show info with
// the pid pid holds, and show stat with one server.
func fakeRuntime(t *testing.T, pid *atomic.Int64) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "admin.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			switch {
			case strings.HasPrefix(line, "show info"):
				fmt.Fprintf(c, "Name: HAProxy\nVersion: 2.6.12\nPid: %d\nStart_time_sec: 1700000000\n", pid.Load())
			case strings.HasPrefix(line, "show stat"):
				fmt.Fprintf(c, "%s\n%s\n", statHeader, statLine("www", "a1", 1, 0, 0, 0, [5]uint64{0, 7, 0, 0, 1}))
			}
			_ = c.Close()
		}
	}()
	return sock
}

// Stats names the process that answered, and leaves the driver's record
// of it alone: Watch still sees a reload that Stats saw first.
func TestStatsLeavesTheReloadToWatch(t *testing.T) {
	var pid atomic.Int64
	pid.Store(100)
	h, err := NewHAProxy(HAProxyOptions{Socket: fakeRuntime(t, &pid)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.process(t.Context()); err != nil {
		t.Fatal(err)
	}
	pid.Store(200) // a reload
	proc, servers, err := h.Stats(t.Context())
	if err != nil || proc != "200@1700000000" || len(servers) != 1 || servers[0].Hrsp[1] != 7 {
		t.Fatalf("Stats = %q %+v %v", proc, servers, err)
	}
	if changed, err := h.process(t.Context()); err != nil || !changed {
		t.Fatalf("process after Stats: changed %v (%v), want the reload seen", changed, err)
	}
	if processOf("Name: HAProxy\nVersion: 2.6\n") != "" {
		t.Fatal("processOf of an answer without Pid, want empty")
	}
}

// FuzzParseStat: any answer parses without a panic, and an answer it
// refuses gives no servers.
func FuzzParseStat(f *testing.F) {
	f.Add(statHeader + "\n" + statLine("www", "a1", 1, 2, 3, 4, [5]uint64{0, 10, 1, 5, 7}) + "\n")
	f.Add("# pxname,svname,sid,type,hrsp_1xx,hrsp_2xx,hrsp_3xx,hrsp_4xx,hrsp_5xx,hrsp_other,econ,eresp,wretr,status\nwww,a1,1,2,,,,,,,,,,UP\n")
	f.Add("# pxname\n\"")
	f.Fuzz(func(t *testing.T, text string) {
		servers, err := ParseStat(text)
		if err != nil && servers != nil {
			t.Fatalf("servers %+v with an error %v", servers, err)
		}
	})
}
