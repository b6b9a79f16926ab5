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
// info. Webhooks do not get origin_state notices unless WithOriginStates is
// given: a fleet's origins change state often, and the level events are
// what needs a person.
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
// format = "alertmanager": the url is Alertmanager's POST /api/v2/alerts
// (such as "http://alertmanager:9093/api/v2/alerts"); the body is a list of
// Alert. Every alert has the labels alertname, site, severity and
// service="vigil", and the annotations summary (the title), description
// (the text) and seq (and actor when there is one).
//
//   - all_levels_unhealthy: a firing VigilAllLevelsUnhealthy
//     {site, severity="critical"}, endsAt 24 h after startsAt
//     (ConditionAlertDuration, a safety net). vigil resolves it (the same
//     labels, endsAt = startsAt = the event's time) when it sees the site
//     recover: a failover or failback switch, a failback_available, an
//     unhealthy origin turning healthy or a disabled one enabled. It sends
//     that resolution once per site; after a restart it does not know what
//     fired, so the first recovery of each site sends one (harmless if
//     nothing fired).
//   - level_switched: VigilOriginLevelSwitched {reason, from_level,
//     to_level}, and failback_available: VigilFailbackAvailable {level}.
//     These are moments, not conditions: endsAt is an hour after startsAt
//     (EventAlertDuration), so Alertmanager notifies and then lets them
//     resolve.
//   - origin_state makes no alert.
//
// With WithExternalURL, generatorURL links to the site's events in the API.
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
// exactly that long instead, capped at 15 min (WithMaxRetryAfter). Each
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
