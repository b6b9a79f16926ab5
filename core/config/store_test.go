package config_test

import (
	"testing"
	"time"

	"github.com/vigilcdn/vigil/core/config"
)

func TestEtcdStoreBlock(t *testing.T) {
	const head = "source \"direct\" {\n  plugin = \"vigil-source-direct\"\n}\n"
	tests := []struct {
		name string
		src  string
		want config.EtcdStore
	}{
		{"defaults", `control {
  store "etcd" {
    endpoints = ["127.0.0.1:2379"]
  }
}
`, config.EtcdStore{Endpoints: []string{"127.0.0.1:2379"}, Prefix: "/vigil", LeaseTTL: 10 * time.Second,
			Mode: config.ModeActiveStandby, DialTimeout: 5 * time.Second, MaxTxnOps: 128, CompactionInterval: 5 * time.Minute}},
		{"sharded", `control {
  store "etcd" {
    endpoints    = ["http://10.0.0.1:2379", "https://10.0.0.2:2379"]
    prefix       = "/cdn/vigil"
    lease_ttl    = "4s"
    mode         = "sharded"
    dial_timeout = "2s"
    username_env = "ETCD_USER"
    password_env = "ETCD_PASSWORD"
    id           = "cp-1"
    advertise    = "http://10.0.0.5:8470/"
    max_txn_ops  = 1024
    compaction_interval = "30s"
  }
}
`, config.EtcdStore{Endpoints: []string{"http://10.0.0.1:2379", "https://10.0.0.2:2379"}, Prefix: "/cdn/vigil",
			LeaseTTL: 4 * time.Second, Mode: config.ModeSharded, DialTimeout: 2 * time.Second,
			UsernameEnv: "ETCD_USER", PasswordEnv: "ETCD_PASSWORD", ID: "cp-1", Advertise: "http://10.0.0.5:8470", MaxTxnOps: 1024,
			CompactionInterval: 30 * time.Second}},
		{"compaction off", `control {
  store "etcd" {
    endpoints           = ["127.0.0.1:2379"]
    compaction_interval = "0"
  }
}
`, config.EtcdStore{Endpoints: []string{"127.0.0.1:2379"}, Prefix: "/vigil", LeaseTTL: 10 * time.Second,
			Mode: config.ModeActiveStandby, DialTimeout: 5 * time.Second, MaxTxnOps: 128}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, diags := config.Parse("t.hcl", []byte(head+tt.src))
			if diags.HasErrors() {
				t.Fatal(diags.Error())
			}
			got := cfg.Control.Store
			if got == nil {
				t.Fatal("no store block decoded")
			}
			got.DeclRange = tt.want.DeclRange
			if got.Prefix != tt.want.Prefix || got.LeaseTTL != tt.want.LeaseTTL || got.Mode != tt.want.Mode ||
				got.DialTimeout != tt.want.DialTimeout || got.UsernameEnv != tt.want.UsernameEnv ||
				got.PasswordEnv != tt.want.PasswordEnv || got.ID != tt.want.ID || got.Advertise != tt.want.Advertise ||
				got.MaxTxnOps != tt.want.MaxTxnOps || got.CompactionInterval != tt.want.CompactionInterval || len(got.Endpoints) != len(tt.want.Endpoints) {
				t.Fatalf("got %+v\nwant %+v", *got, tt.want)
			}
		})
	}
	cfg, diags := config.Parse("t.hcl", []byte(head))
	if diags.HasErrors() || cfg.Control.Store != nil {
		t.Fatalf("without a store block the store must stay the embedded one: %v %+v", diags, cfg.Control.Store)
	}
}
