package ha

import (
	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	n             *Node
	role          *prometheus.GaugeVec
	owned         prometheus.Gauge
	members       prometheus.Gauge
	fenced        prometheus.Counter
	leaseLost     prometheus.Counter
	leaderChanges prometheus.Counter
	quorum        prometheus.GaugeFunc
	// compactions and compacted are nil when compaction is off.
	compactions prometheus.CounterFunc
	compacted   prometheus.GaugeFunc
}

func newMetrics(n *Node) *metrics {
	m := &metrics{
		n: n,
		role: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vigil_cluster_role", Help: "1 for this instance's role (leader, standby, shard, detached), 0 for the others.",
		}, []string{"role"}),
		owned: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vigil_cluster_owned_sites", Help: "Sites this instance probes: all of them on the leader, its share when sharded, 0 on a standby.",
		}),
		members: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vigil_cluster_members", Help: "Live instances registered in etcd.",
		}),
		fenced: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vigil_cluster_fenced_writes_total", Help: "State writes refused by the fence because this instance had lost its role.",
		}),
		leaseLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vigil_cluster_lease_lost_total", Help: "Terms ended because the etcd lease was lost or not renewed within lease_ttl.",
		}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vigil_cluster_leadership_changes_total", Help: "Times this instance became or stopped being the leader.",
		}),
	}
	m.quorum = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "vigil_cluster_etcd_quorum", Help: "1 when etcd answered this instance within lease_ttl, 0 when it did not (no quorum, or this instance is cut off).",
	}, func() float64 {
		if n.Info().Quorum {
			return 1
		}
		return 0
	})
	if c := n.compactor; c != nil {
		m.compactions = prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "vigil_etcd_compactions_total", Help: "Compactions of etcd's history made by this instance (one instance of the cluster compacts each compaction_interval).",
		}, func() float64 { return float64(c.Compactions()) })
		m.compacted = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "vigil_etcd_compacted_revision", Help: "The etcd revision this instance last compacted the history to (0 before its first compaction).",
		}, func() float64 { return float64(c.Compacted()) })
	}
	return m
}

// current is a collector whose values are brought up to date when it is
// scraped: the role must not lag when nothing happens (etcd gone silent).
type current struct {
	m *metrics
	c prometheus.Collector
}

func (c current) Describe(ch chan<- *prometheus.Desc) { c.c.Describe(ch) }
func (c current) Collect(ch chan<- prometheus.Metric) {
	c.m.update()
	c.c.Collect(ch)
}

// Collectors are the cluster metrics, to register once.
func (n *Node) Collectors() []prometheus.Collector {
	m := n.metrics
	cs := []prometheus.Collector{current{m, m.role}, current{m, m.owned}, current{m, m.members}, m.fenced, m.leaseLost, m.leaderChanges, m.quorum}
	if m.compactions != nil {
		cs = append(cs, m.compactions, m.compacted)
	}
	return cs
}

func (m *metrics) update() {
	info := m.n.Info()
	for _, r := range []string{RoleLeader, RoleStandby, RoleShard, RoleDetached} {
		v := 0.0
		if r == info.Role {
			v = 1
		}
		m.role.WithLabelValues(r).Set(v)
	}
	m.owned.Set(float64(info.OwnedSites))
	m.members.Set(float64(len(info.Members)))
}
