package ha

import (
	"strings"
	"testing"
	"time"
)

// TestRefusalWording: the 421 says what the instance knows, in each case,
// and its hint gives the CLI's real flag (-address) and VIGIL_ADDR.
func TestRefusalWording(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ago := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	a := &Member{ID: "cp-a", URL: "http://10.0.0.1:8470"}
	self := &Member{ID: "cp-b", URL: "http://10.0.0.2:8470"}
	base := func(mod func(*Info)) Info {
		i := Info{ID: "cp-b", URL: self.URL, Mode: "active-standby", Role: RoleStandby, State: StateStandby,
			Quorum: true, EtcdSeenAt: ago(100 * time.Millisecond), AsOf: now}
		mod(&i)
		return i
	}
	const cmd = "vigil switch -address ADDR www LEVEL"
	tests := []struct {
		name      string
		info      Info
		msg, hint []string // substrings
		notMsg    string
	}{
		{"standby, leader confirmed", base(func(i *Info) { i.Leader, i.LeaderConfirmed, i.LeaderSeenAt = a, true, ago(time.Second) }),
			[]string{"this instance is a standby; the leader is cp-a at http://10.0.0.1:8470"},
			[]string{"vigil switch -address http://10.0.0.1:8470 www LEVEL", "VIGIL_ADDR=http://10.0.0.1:8470"}, "no quorum"},
		{"standby, none elected", base(func(i *Info) { i.State = StateNoLeader }),
			[]string{"no leader is elected now"}, []string{"GET /v1/cluster"}, "the leader is"},
		{"no quorum, another leader last seen", base(func(i *Info) {
			i.Role, i.State, i.Quorum, i.EtcdSeenAt = RoleDetached, StateNoQuorum, false, ago(12*time.Second)
			i.Leader, i.LeaderSeenAt = a, ago(12*time.Second)
		}),
			[]string{"no quorum: cannot confirm the leader; last seen cp-a at http://10.0.0.1:8470 12s ago", "has not answered this instance for 12s"},
			[]string{"may still act", "vigil switch -address http://10.0.0.1:8470 www LEVEL", "etcdctl endpoint health"}, "standby"},
		{"no quorum, this instance was the leader", base(func(i *Info) {
			i.Role, i.State, i.Quorum, i.EtcdSeenAt = RoleDetached, StateNoQuorum, false, ago(3*time.Second)
			i.Leader, i.LeaderSeenAt = self, ago(3*time.Second)
		}),
			[]string{"no quorum: cannot confirm the leader; last seen cp-b (this instance) at http://10.0.0.2:8470 3.0s ago"},
			[]string{"stopped acting", "etcdctl endpoint health"}, "the leader is"},
		{"no quorum, no leader ever seen", base(func(i *Info) {
			i.Role, i.State, i.Quorum, i.EtcdSeenAt = RoleDetached, StateNoQuorum, false, nil
		}),
			[]string{"no quorum: cannot confirm the leader and none was seen; etcd has not answered this instance yet"},
			[]string{"etcdctl endpoint health"}, "last seen"},
		{"etcd names this instance, which lost its role", base(func(i *Info) {
			i.State, i.Leader, i.LeaderSeenAt = StateNoLeader, self, ago(time.Second)
		}),
			[]string{"no leader acts now: etcd still names this instance"}, []string{"GET /v1/cluster"}, "the leader is"},
		{"taking over", base(func(i *Info) { i.State, i.Leader, i.LeaderConfirmed = StateTakingOver, self, true }),
			[]string{"just elected leader and is reloading"}, []string{"retry here"}, "standby"},
		{"joining, leader confirmed", base(func(i *Info) {
			i.Role, i.State, i.Leader, i.LeaderConfirmed, i.LeaderSeenAt = RoleDetached, StateJoining, a, true, ago(time.Second)
		}),
			[]string{"starting a new term", "the leader is cp-a at http://10.0.0.1:8470"}, []string{"-address http://10.0.0.1:8470"}, "no quorum"},
		{"standby, leader not confirmed lately", base(func(i *Info) {
			i.State, i.Leader, i.LeaderSeenAt = StateNoLeader, a, ago(5*time.Second)
		}),
			[]string{"cannot confirm the leader; last seen cp-a at http://10.0.0.1:8470 5.0s ago"}, []string{"-address http://10.0.0.1:8470"}, "no quorum"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, hint := leaderRefusal(tt.info, cmd)
			for _, want := range tt.msg {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q\nlacks %q", msg, want)
				}
			}
			for _, want := range tt.hint {
				if !strings.Contains(hint, want) {
					t.Errorf("hint %q\nlacks %q", hint, want)
				}
			}
			if tt.notMsg != "" && strings.Contains(msg, tt.notMsg) {
				t.Errorf("message %q says %q", msg, tt.notMsg)
			}
			if strings.Contains(hint, "-addr ") {
				t.Errorf("hint %q names -addr; the CLI's flag is -address", hint)
			}
		})
	}
}

func TestOwnerRefusalWording(t *testing.T) {
	now := time.Now()
	seen := now.Add(-7 * time.Second)
	b := Member{ID: "cp-b", URL: "http://10.0.0.2:8470"}
	away := Info{ID: "cp-a", Mode: "sharded", Role: RoleDetached, State: StateNoQuorum, EtcdSeenAt: &seen, AsOf: now}
	msg, hint := ownerRefusal(away, "s01", b, "vigil switch -address ADDR s01 LEVEL")
	if !strings.Contains(msg, "no quorum: cannot confirm the owner of site s01; by the members last seen it is cp-b at http://10.0.0.2:8470") ||
		!strings.Contains(msg, "for 7.0s") || !strings.Contains(hint, "vigil switch -address http://10.0.0.2:8470 s01 LEVEL") {
		t.Errorf("away, owner elsewhere: %q / %q", msg, hint)
	}
	msg, _ = ownerRefusal(away, "s02", Member{ID: "cp-a"}, "")
	if !strings.Contains(msg, "it is this instance, which does not act") {
		t.Errorf("away, owner is this instance: %q", msg)
	}
	here := Info{ID: "cp-a", Mode: "sharded", Role: RoleShard, Acting: true, State: StateActing, Quorum: true, AsOf: now}
	msg, hint = ownerRefusal(here, "s01", b, cliCommand("s01/origins/o1/disable"))
	if msg != "this instance does not own site s01; its owner is cp-b at http://10.0.0.2:8470" ||
		!strings.Contains(hint, "vigil origin disable -address http://10.0.0.2:8470 s01 o1") {
		t.Errorf("owned elsewhere: %q / %q", msg, hint)
	}
}

func TestCLICommand(t *testing.T) {
	for path, want := range map[string]string{
		"www/switch":               "vigil switch -address ADDR www LEVEL",
		"www/probe":                "vigil probe -address ADDR www",
		"www/drill":                "vigil drill -address ADDR www",
		"www/origins/a1/enable":    "vigil origin enable -address ADDR www a1",
		"www/something/else/there": "vigil COMMAND -address ADDR ...",
	} {
		if got := cliCommand(path); got != want {
			t.Errorf("cliCommand(%q) = %q, want %q", path, got, want)
		}
	}
	if got := sendTo("vigil probe -address ADDR w%s", "http://x:1"); got != "send it there: vigil probe -address http://x:1 w%s (or set VIGIL_ADDR=http://x:1)" {
		t.Errorf("sendTo: %q", got)
	}
}
