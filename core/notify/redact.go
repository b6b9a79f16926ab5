package notify

import (
	"net/url"
	"sort"
	"strings"
)

// Webhook URLs often carry their secret in the path (Slack:
// /services/T…/B…/TOKEN) or the query (?token=…). Logs, errors and metrics
// show only a webhook's target, its scheme and host.

// target is what may be shown of a webhook URL: scheme://host[:port].
func target(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(invalid url)"
	}
	return u.Scheme + "://" + u.Host
}

// redactor removes a webhook URL and the parts of it that may be secret
// from text that is about to be logged (errors, response bodies).
type redactor struct {
	target string
	// whole holds spellings of the full URL, replaced by the target.
	whole []string
	// parts holds fragments (user info, path segments, query values),
	// replaced by "REDACTED"; longest first.
	parts []string
}

func newRedactor(raw string) *redactor {
	r := &redactor{target: target(raw), whole: []string{raw}}
	u, err := url.Parse(raw)
	if err != nil {
		return r
	}
	r.whole = append(r.whole, u.String(), u.Redacted())
	add := func(s string) {
		if len(s) >= 3 {
			r.parts = append(r.parts, s)
		}
	}
	if u.User != nil {
		add(u.User.String())
		add(u.User.Username())
		if p, ok := u.User.Password(); ok {
			add(p)
		}
	}
	if u.Path != "" && u.Path != "/" {
		add(u.Path)
		add(u.EscapedPath())
		for _, seg := range strings.Split(u.Path, "/") {
			add(seg)
		}
		for _, seg := range strings.Split(u.EscapedPath(), "/") {
			add(seg)
		}
	}
	if u.RawQuery != "" {
		add(u.RawQuery)
		for _, vs := range u.Query() {
			for _, v := range vs {
				add(v)
				add(url.QueryEscape(v))
			}
		}
	}
	add(u.Fragment)
	sort.Slice(r.whole, func(i, j int) bool { return len(r.whole[i]) > len(r.whole[j]) })
	sort.Slice(r.parts, func(i, j int) bool { return len(r.parts[i]) > len(r.parts[j]) })
	return r
}

// String returns s with the URL and its secret-looking parts removed.
func (r *redactor) String(s string) string {
	const mark = "\x00target\x00"
	for _, w := range r.whole {
		if w != "" {
			s = strings.ReplaceAll(s, w, mark)
		}
	}
	for _, p := range r.parts {
		s = strings.ReplaceAll(s, p, "REDACTED")
	}
	return strings.ReplaceAll(s, mark, r.target)
}

// Error is String for an error; nil stays nil.
func (r *redactor) Error(err error) string {
	if err == nil {
		return ""
	}
	return r.String(err.Error())
}
