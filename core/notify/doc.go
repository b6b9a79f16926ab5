// Package notify turns the event journal into notices and delivers them:
// every notice to the log, and to each `notify "webhook" "NAME"` block, at
// least once.
//
// # Notices
//
// A journal event (store.Event) is worded by NoticeOf:
//
//	level_switched, reason failover or failback  "Origin level switched automatically"
//	level_switched, reason manual                "Origin level switched manually" (who, when, from, to)
//	level_switched, reason config                "Origin level reset by configuration"
//	failback_available                           "Origin recovered (manual failback available)"
//	all_levels_unhealthy                         "All origin levels unhealthy"
//	origin_state                                 "Origin state changed"
//
// The log gets every notice, origin_state included, as one line whose
// message is the title and whose fields are site, kind, seq, time, reason,
// from_level, to_level, level, available_level, origin, actor and text
// (those that apply); all_levels_unhealthy logs at error level, failovers,
// configuration resets and origins turning unhealthy at warn, the rest at
// info. Webhooks do not get origin_state notices unless their events list
// them: a fleet's origins change state often, and the level events are what
// needs a person.
//
// # Webhook bodies
//
// Each webhook gets one POST per notice, Content-Type application/json,
// with an Idempotency-Key header that is the same on every redelivery.
//
// format = "json" (JSONBody):
//
//	{"version": 1, "seq": 42, "time": "2026-05-01T10:00:00Z", "site": "www.example.com",
//	 "kind": "level_switched", "reason": "failover", "severity": "warning",
//	 "title": "Origin level switched automatically",
//	 "text": "Site www.example.com switched from level 1 to level 2 (failover: level 1 is unhealthy).",
//	 "levels": {"from": 1, "to": 2, "current": 2},
//	 "actor": "alice",                       (operator actions only)
//	 "origin": {"name": "a1", "from": "healthy", "to": "unhealthy"},  (origin_state only)
//	 "round": 17,                            (0, left out, for operator actions)
//	 "event": {"kind": "level_switched", "from": 1, "to": 2, "reason": "failover"}}
//
// levels has from/to/current for level_switched, available (the healthy
// higher level) for failback_available and current for
// all_levels_unhealthy. severity is critical, warning or info.
//
// format = "slack" (SlackBody): a Slack incoming-webhook message, {"text":
// ":warning: *TITLE*\nTEXT", "blocks": [a mrkdwn section with the same text,
// a context line with the site, kind, seq and time]}.
//
// A webhook gets the event kinds its events attribute lists (by default
// level_switched, failback_available and all_levels_unhealthy; origin_state
// when it is listed). Its URL may come from url_env or
// url_file, and its extra headers from headers and header_env: those are
// read when the dispatcher is made, and never logged.
//
// # Alertmanager
//
// A notify "alertmanager" notifier is not a journal reader: it sends
// states, as Prometheus does, from the AlertStates given with
// WithAlertStates (the engine's read side). Each alert is a state that
// fires while it lasts: VigilSiteOnBackupLevel (a site off its top level),
// VigilAllLevelsUnhealthy, VigilFailbackAvailable (a healthy higher level
// while failback is manual) and VigilOriginUnhealthy (with the origin
// label). Every alert has the labels alertname, site, level, vigil (the
// installation) and severity, the annotations summary, description and,
// where one helps, command (the vigil switch or vigil probe to run), and a
// generatorURL to the site's status page.
//
// Every active alert is posted to each Alertmanager's /api/v2/alerts at
// every resend_interval (and within a second of a commit), with endsAt four
// intervals ahead, so that an Alertmanager restarted meanwhile has it back
// within one interval; an alert whose state ended is sent with endsAt set
// to then for four intervals more. A failed post is logged once and
// counted in vigil_notify_retries_total; the next send carries the same
// states, so nothing is lost. Alertmanager's grouping, inhibition and
// silences apply unchanged.
//
// # The control plane's own alerts
//
// Given a Control (WithControl), the Alertmanager notifiers also post two
// alerts about the agent itself, from memory rather than the journal, so
// that they go out when nothing can be saved: VigilStateNotSaved from the
// first failed commit to the first one that succeeds (labels reason,
// one of disk_full, etcd_refused, other, classed by CommitFailureReason
// with errors.Is and errors.As; and instance, the host name), and
// VigilStoreOnReserve while the bbolt store writes into its space reserve.
// A fenced commit ends VigilStateNotSaved rather than firing it: the role
// went to another instance, which saves. They are sent within a second of
// a change, and resent and resolved like the others. The error text they
// carry keeps only the scheme and host of any URL, and loses the
// notifier's own URL parts and header values. Webhooks get no notice of
// them: a notice is a journal event with a saved cursor, and these are
// conditions that may not be saved. Control logs once when the commits
// start failing and once when they succeed again, and counts every failure
// in vigil_commit_failures_total{reason}.
//
// # Delivery
//
// Each notifier (the log and each webhook) has its own goroutine and its own
// delivery cursor in the store (the log's is named LogName). It reads the
// journal after its cursor, in order, and after each notice is delivered
// (a 2xx) it stores the cursor: a restart resumes where it stopped, and at
// most the one notice that was in flight is sent twice. The log's cursor is
// stored once per batch of lines. A webhook that is down holds back only
// itself; Wake never blocks the engine.
//
// A notifier with no stored cursor (a new webhook, or the first start)
// starts with the events after the newest in the journal: adding a webhook
// does not replay history. A notifier that falls so far behind that the
// bounded journal dropped events it had not handled logs, at error level,
// how many it lost, and counts them in vigil_notify_lost_events_total.
//
// Retries use hashicorp/go-retryablehttp with this package's CheckRetry and
// Backoff: transport errors (refused, reset, timeout, TLS), 408, 429 and
// every 5xx are retried, with no limit on attempts, until delivered or Run
// stops (at least once: the cursor waits). The wait is exponential from
// 1 s to 1 min (WithRetryWait), each wait drawn uniformly from [d/2, d];
// a 429 or 503 with Retry-After (delay-seconds or an HTTP date) waits
// exactly that long instead, capped at 15 min (DefaultMaxRetryAfter). Each
// attempt is bounded by the notifier's timeout. Redirects are not
// followed. Any other status (a 4xx other than 408 and 429, a 3xx) is a
// permanent failure of that notice: it is logged at error level with the
// status and the start of the response, counted as outcome="rejected", and
// the notifier moves on.
//
// Webhook URLs often hold a token in their path or query. Logs, errors and
// metrics show only a webhook's scheme and host ("target"); errors and
// response bodies are scrubbed of the URL and its parts before logging.
//
// # Configuration reload
//
// Reconfigure swaps the webhooks of a running Dispatcher: unchanged ones go
// on undisturbed, changed ones restart from their stored cursor, removed
// ones stop, new ones start. The Dispatcher and its collectors live as long
// as the agent.
package notify
