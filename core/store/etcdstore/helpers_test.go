package etcdstore_test

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	etcdstore "github.com/vigilcdn/vigil/core/store/etcdstore"
)

// callTimeout bounds each call to etcd in these tests. The store's
// default (5 s) suits production, where a call that slow means trouble;
// beside CPU-bound processes a transaction of 2,000 writes can wait that
// long for its fsync, and no test here measures time. It only catches a
// hang.
const callTimeout = 2 * time.Minute

// newStore is etcdstore.New with callTimeout unless the test sets its own.
func newStore(cli *clientv3.Client, opts etcdstore.Options) *etcdstore.Store {
	if opts.Timeout == 0 {
		opts.Timeout = callTimeout
	}
	return etcdstore.New(cli, opts)
}
