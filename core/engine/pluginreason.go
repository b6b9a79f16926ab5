package engine

import (
	"sync"
	"sync/atomic"
)

// maxPluginReasons is how many distinct plugin reasons (sdk.Vote's
// PluginReason) the process keeps as fields of its votes. A vote's record
// holds one byte for it, so that the field costs no memory per vote; the
// plugin reasons of the shipped plugins are a handful. A reason past the
// bound is kept in the vote's detail, as text, instead.
const maxPluginReasons = 255

// pluginReasons numbers the plugin reasons of votes: 0 is none, 1 to
// maxPluginReasons one reason each, for the life of the process. Safe for
// concurrent use: rounds, confirmation rounds and probes number, the
// API's views read.
type pluginReasons struct {
	mu    sync.Mutex
	index map[string]uint8
	names atomic.Pointer[[]string] // names[i-1] is reason i; copied on write
}

// theReasons is the process's table: votes of several engines (tests,
// HA) share it, which is harmless, as it only names strings.
var theReasons pluginReasons

// number is s's number, 0 for s empty or when the table is full.
func (t *pluginReasons) number(s string) uint8 {
	if s == "" {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if i, ok := t.index[s]; ok {
		return i
	}
	var names []string
	if p := t.names.Load(); p != nil {
		names = *p
	}
	if len(names) >= maxPluginReasons {
		return 0
	}
	if t.index == nil {
		t.index = map[string]uint8{}
	}
	next := append(names[:len(names):len(names)], s)
	t.names.Store(&next)
	t.index[s] = uint8(len(next))
	return uint8(len(next))
}

// name is the reason numbered i, "" for 0.
func (t *pluginReasons) name(i uint8) string {
	if i == 0 {
		return ""
	}
	p := t.names.Load()
	if p == nil || int(i) > len(*p) {
		return ""
	}
	return (*p)[i-1]
}
