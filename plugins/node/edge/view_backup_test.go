package edge

import (
	"testing"

	"github.com/vigilcdn/vigil/sdk/publication"
)

// TestBuildBackupBeforeTopology: before GET /v1/sites is read, the View
// still carries the backup level the publication names, so the first
// configuration an edge gets has its backup servers.
func TestBuildBackupBeforeTopology(t *testing.T) {
	snap := &publication.Snapshot{Version: 1, Sites: []publication.Site{{
		Name: "shop", Hostname: "shop.example", Level: 1,
		Origins: []publication.Origin{{Name: "a", Address: "http://127.0.0.1:8001", State: "healthy"}},
		Backup: &publication.Backup{Level: 2, Origins: []publication.Origin{
			{Name: "b", Address: "http://127.0.0.1:8002", State: "healthy"},
		}},
	}}}
	tests := []struct {
		name       string
		topo       Topology
		wantBackup []string
	}{
		{"no topology yet", nil, []string{"b"}},
		{"topology without the site", Topology{"other": {{Name: "x", Address: "http://127.0.0.1:9", Level: 2}}}, []string{"b"}},
		{"topology wins", Topology{"shop": {
			{Name: "a", Address: "http://127.0.0.1:8001", Level: 1},
			{Name: "c", Address: "http://127.0.0.1:8003", Level: 3},
		}}, []string{"c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, skipped := Build(snap, tt.topo, "", nil)
			if len(skipped) != 0 {
				t.Fatalf("skipped %v", skipped)
			}
			var got []string
			for _, o := range v.Sites[0].Backup {
				got = append(got, o.Name)
			}
			if len(got) != len(tt.wantBackup) || (len(got) > 0 && got[0] != tt.wantBackup[0]) {
				t.Fatalf("backup servers = %v, want %v", got, tt.wantBackup)
			}
		})
	}
}
