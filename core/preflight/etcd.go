package preflight

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"sort"

	"github.com/hashicorp/hcl/v2"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/vigilcdn/vigil/core/config"
	etcdstore "github.com/vigilcdn/vigil/core/store/etcdstore"
)

// checkEtcd asks the etcd cluster of control { store "etcd" } how many
// operations a transaction may have, as the agent does when it joins
// (etcdstore's ProbeLimit, which writes nothing), and warns when
// max_txn_ops says more: the agent then splits its commits by what etcd
// takes. An etcd it cannot reach is a warning too: the agent starts and
// waits for it. Offline, nothing is asked.
func checkEtcd(ctx context.Context, cfg *config.Config, loc *locator, offline bool) hcl.Diagnostics {
	ec := cfg.Control.Store
	if ec == nil || offline {
		return nil
	}
	at := func() *hcl.Range {
		if r := loc.controlAttr("store", "max_txn_ops"); r.Filename != "" {
			return r.Ptr()
		}
		return ec.DeclRange.Ptr()
	}
	cli, err := etcdClient(ec)
	if err == nil {
		defer cli.Close()
		pctx, cancel := context.WithTimeout(ctx, ec.DialTimeout+ec.LeaseTTL)
		defer cancel()
		st := etcdstore.New(cli, etcdstore.Options{Prefix: ec.Prefix, MaxTxnOps: ec.MaxTxnOps, Timeout: ec.DialTimeout + ec.LeaseTTL})
		var used, configured int
		if used, configured, err = st.ProbeLimit(pctx); err == nil {
			if used < configured {
				return hcl.Diagnostics{{
					Severity: hcl.DiagWarning,
					Summary:  "etcd takes fewer operations per transaction than max_txn_ops",
					Detail: fmt.Sprintf("max_txn_ops = %d, but etcd at %v takes at most %d operations in one transaction (its --max-txn-ops). The agent splits its commits by %d, so nothing fails; set max_txn_ops = %d to say so, or raise etcd's --max-txn-ops on every member.",
						configured, ec.Endpoints, used, used, used),
					Subject: at(),
				}}
			}
			return nil
		}
	}
	return hcl.Diagnostics{{
		Severity: hcl.DiagWarning,
		Summary:  "etcd not reached: max_txn_ops not checked",
		Detail: fmt.Sprintf("Asking etcd at %v how many operations a transaction may have failed: %v. The agent starts all the same and waits for etcd; it asks again when it joins the cluster.",
			ec.Endpoints, err),
		Subject: at(),
	}}
}

// etcdClient connects to etcd as the agent does: endpoints, dial
// timeout, credentials from the environment, TLS from the block's files.
func etcdClient(ec *config.EtcdStore) (*clientv3.Client, error) {
	cc := clientv3.Config{Endpoints: ec.Endpoints, DialTimeout: ec.DialTimeout, Logger: zap.NewNop()}
	if ec.UsernameEnv != "" {
		cc.Username, cc.Password = os.Getenv(ec.UsernameEnv), os.Getenv(ec.PasswordEnv)
	}
	if ec.CAFile != "" || ec.CertFile != "" {
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if ec.CAFile != "" {
			pool, err := config.LoadCAPool(ec.CAFile)
			if err != nil {
				return nil, err
			}
			tc.RootCAs = pool
		}
		if ec.CertFile != "" {
			cert, err := tls.LoadX509KeyPair(ec.CertFile, ec.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("etcd client certificate: %w", err)
			}
			tc.Certificates = []tls.Certificate{cert}
		}
		cc.TLS = tc
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return nil, fmt.Errorf("etcd client for %v: %w", ec.Endpoints, err)
	}
	return cli, nil
}

// Notes says, in plain words, what the agent will do with this
// configuration that a reader could not guess from it: today, how the
// etcd store saves a round larger than max_txn_ops. vigil validate prints
// them under a valid configuration.
func Notes(cfg *config.Config) []string {
	ec := cfg.Control.Store
	if ec == nil {
		return nil
	}
	// The largest round: the sites_per_round sites (with "auto", every
	// site) with the most origins
	// all change, each writing its record, an event per origin and a
	// level switch (a round that probes every site writes no probe marks).
	per := make([]int, 0, len(cfg.Sites))
	for _, s := range cfg.Sites {
		per = append(per, 2+len(s.Origins))
	}
	sort.Sort(sort.Reverse(sort.IntSlice(per)))
	n := min(len(per), max(cfg.Control.SitesPerRound, 1))
	if cfg.Control.SitesPerRoundAuto {
		n = len(per) // an auto-sized round may grow to every site
	}
	ops := 2 // the counters and the journal's pruning
	for _, p := range per[:n] {
		ops += p
	}
	note := fmt.Sprintf("state in etcd: a round is saved in one transaction while it fits in max_txn_ops = %d operations", ec.MaxTxnOps)
	if ops <= ec.MaxTxnOps {
		sites := fmt.Sprintf("%d sites", n)
		if n == 1 {
			sites = "1 site"
		}
		return []string{note + fmt.Sprintf("; the largest round here (%s, about %d operations) always does.", sites, ops)}
	}
	chunks := (ops + ec.MaxTxnOps - 2) / (ec.MaxTxnOps - 1)
	return []string{note + fmt.Sprintf(". A larger one is split: the largest round here (%d sites changing at once, about %d operations) is staged in about %d transactions, then made visible whole by one commit marker, so readers and standbys see all of it or none of it (docs/ha.md). The agent asks etcd its limit when it joins and splits by the smaller.",
		n, ops, chunks)}
}
