package engine

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/vigilcdn/vigil/core/store/etcdstore"
)

// TestStoreHint: the hint follows the error's kind however it is wrapped,
// and not words that merely look like one.
func TestStoreHint(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"no space, wrapped", fmt.Errorf("store: round 7 not saved: %w", &os.PathError{Op: "write", Path: "data/state.db", Err: syscall.ENOSPC}), "the data_dir is full"},
		{"quota", fmt.Errorf("store: %w", &os.PathError{Op: "write", Path: "data/state.db", Err: syscall.EDQUOT}), "the data_dir is full"},
		{"fenced", fmt.Errorf("store: round 7 not saved: %w (this instance is not the leader)", etcdstore.ErrFenced), "lost its role"},
		{"the words only: no space", errors.New("origin \"no space left\" unreachable"), "could not save the change"},
		{"the words only: fence", errors.New("the fence post was not painted"), "could not save the change"},
		{"another error", errors.New("store: timeout"), "could not save the change"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := storeHint(tt.err); !strings.Contains(got, tt.want) {
				t.Fatalf("storeHint(%v) = %q, want it to say %q", tt.err, got, tt.want)
			}
		})
	}
}
