package sdktest_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vigilcdn/vigil/sdk"
	"github.com/vigilcdn/vigil/sdk/sdktest"
)

type plain struct{}

func (plain) Info(context.Context) (sdk.Info, error)           { return sdk.Info{Name: "plain"}, nil }
func (plain) ConfigSchema(context.Context) (sdk.Schema, error) { return sdk.Schema{}, nil }
func (plain) Configure(context.Context, sdk.Config) error      { return nil }
func (plain) Vote(context.Context, sdk.Ballot) ([]sdk.Vote, error) {
	return nil, nil
}

type reporting struct{ plain }

var seen = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

func (reporting) Status(context.Context) (sdk.Status, error) {
	return sdk.Status{Summary: "1 of 2 nodes online", Items: []sdk.StatusItem{
		{Name: "edge-1", State: "online", Labels: map[string]string{"pop": "ams"}, LastSeen: seen},
		{Name: "edge-2", State: "offline", Detail: "missed heartbeats"},
	}}, nil
}

func TestStatusOverGRPC(t *testing.T) {
	t.Run("a reporting plugin", func(t *testing.T) {
		src := sdktest.InProcess(t, reporting{})
		r, ok := src.(sdk.StatusReporter)
		if !ok {
			t.Fatal("the host-side client does not offer Status")
		}
		st, err := r.Status(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if st.Summary != "1 of 2 nodes online" || len(st.Items) != 2 {
			t.Fatalf("status %+v", st)
		}
		a, b := st.Items[0], st.Items[1]
		if a.Name != "edge-1" || a.Labels["pop"] != "ams" || !a.LastSeen.Equal(seen) || b.State != "offline" || !b.LastSeen.IsZero() {
			t.Fatalf("items %+v", st.Items)
		}
	})
	t.Run("a plugin without status", func(t *testing.T) {
		src := sdktest.InProcess(t, plain{})
		_, err := src.(sdk.StatusReporter).Status(context.Background())
		if !errors.Is(err, sdk.ErrNoStatus) {
			t.Fatalf("err %v, want sdk.ErrNoStatus", err)
		}
	})
}
