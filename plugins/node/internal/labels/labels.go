package labels

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// MaxLen bounds a key or a value.
const MaxLen = 63

// MaxLabels bounds the labels of one set.
const MaxLabels = 32

// Set is a set of labels, key to value.
type Set map[string]string

// Parse reads "k=v,k=v" (spaces around items are ignored; "" is the empty
// set). Keys are 1 to 63 of letters, digits and "._-/"; values are 0 to 63
// of letters, digits and "._-". A key may appear once.
func Parse(s string) (Set, error) {
	set := Set{}
	s = strings.TrimSpace(s)
	if s == "" {
		return set, nil
	}
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("label %q: write it as key=value", item)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if err := checkKey(k); err != nil {
			return nil, err
		}
		if err := checkValue(k, v); err != nil {
			return nil, err
		}
		if _, dup := set[k]; dup {
			return nil, fmt.Errorf("label %q is given twice: keep one", k)
		}
		set[k] = v
		if len(set) > MaxLabels {
			return nil, fmt.Errorf("more than %d labels: keep the ones used to select nodes", MaxLabels)
		}
	}
	return set, nil
}

// Check reports whether set (received from the network) is well formed.
func Check(set map[string]string) error {
	if len(set) > MaxLabels {
		return fmt.Errorf("%d labels: at most %d are accepted", len(set), MaxLabels)
	}
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if err := checkKey(k); err != nil {
			return err
		}
		if err := checkValue(k, set[k]); err != nil {
			return err
		}
	}
	return nil
}

// String formats the set as Parse reads it, keys sorted.
func (s Set) String() string {
	parts := make([]string, 0, len(s))
	for _, k := range slices.Sorted(maps.Keys(s)) {
		parts = append(parts, k+"="+s[k])
	}
	return strings.Join(parts, ",")
}

// Matches reports whether labels carries every label of the selector s.
// The empty selector matches everything.
func (s Set) Matches(labels map[string]string) bool {
	for k, v := range s {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// ParseSiteSelector reads one site_labels entry, "SITE: k=v,k=v": the
// nodes that probe SITE's origins must carry every listed label.
func ParseSiteSelector(s string) (site string, sel Set, err error) {
	site, spec, ok := strings.Cut(s, ":")
	site = strings.TrimSpace(site)
	if !ok || site == "" {
		return "", nil, fmt.Errorf("%q: write it as \"SITE: key=value,key=value\"", s)
	}
	sel, err = Parse(spec)
	if err != nil {
		return "", nil, fmt.Errorf("site %q: %w", site, err)
	}
	if len(sel) == 0 {
		return "", nil, fmt.Errorf("site %q: no labels after the colon: list at least one key=value", site)
	}
	return site, sel, nil
}

func checkKey(k string) error {
	if k == "" || len(k) > MaxLen {
		return fmt.Errorf("label key %q: use 1 to %d characters", clip(k), MaxLen)
	}
	for i := 0; i < len(k); i++ {
		if !word(k[i]) && k[i] != '/' {
			return fmt.Errorf("label key %q: use only letters, digits and ._-/", clip(k))
		}
	}
	return nil
}

func checkValue(k, v string) error {
	if len(v) > MaxLen {
		return fmt.Errorf("label %q: the value is longer than %d characters", k, MaxLen)
	}
	for i := 0; i < len(v); i++ {
		if !word(v[i]) {
			return fmt.Errorf("label %q: value %q: use only letters, digits and ._-", k, clip(v))
		}
	}
	return nil
}

func word(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
