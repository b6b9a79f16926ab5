// vigil status page: a client of the agent's API (see core/statuspage/doc.go).
//
// How it stays current: a long-poll of GET v1/events?wait=25s returns the
// moment anything happens (an origin changes state, a level switches, an
// operator acts), and the page then re-reads GET v1/sites at once. Votes,
// verdicts and reasons change every round without an event, so v1/sites is
// also re-read every few seconds while the tab is visible. Both are cheap for
// the agent: the views are an in-memory snapshot and the long-poll waits on
// the journal without work.
'use strict';
(() => {
  const POLL_MS = 4000; // per-round details (votes, verdicts, last probe)
  const NODES_RETRY_MS = 60000; // re-check v1/nodes after a 404 this often
  const EVENTS_KEPT = 100; // events shown in the site view
  const PAGE = 1000; // events per catch-up request
  const SITES_PAGE = 200; // sites per page of the list; "Show more" adds a page
  const AUTO_OPEN = 5; // a fleet this small shows every site open
  const STATUS_WORDS = {
    down: 'down', failed_over: 'failed over', degraded: 'degraded', paused: 'paused', unknown: 'not judged yet', ok: 'ok',
  };

  const $ = (id) => document.getElementById(id);
  const store = window.sessionStorage;

  const STATES = {
    healthy: ['●', 'healthy'],
    unhealthy: ['✕', 'unhealthy'],
    unknown: ['?', 'unknown'],
    disabled: ['–', 'disabled'],
  };
  const VERDICTS = { up: ['▲', 'up'], down: ['▼', 'down'], none: ['·', 'none'] };

  const st = {
    sites: [], // SiteView list: a page of the fleet, or the routed site
    limit: SITES_PAGE,
    problemOnly: false,
    filter: 'all', // 'all' (problems first), 'problems', or one status
    search: '', // site name prefix
    summary: null, // GET v1/summary, null where the agent has none
    expanded: new Set(), // site names whose row is open
    history: {}, // site -> { round, data } from GET v1/sites/{site}/history
    total: 0, // sites the list's filter matches
    counts: null, // the fleet's sites by status
    more: false, // the list has more sites than shown
    offline: [], // nodes that stopped heartbeating
    round: 0,
    loaded: false,
    lastSeq: 0,
    caughtUp: false,
    events: [], // recent events of the routed site, oldest first
    eventsFor: null,
    nodes: null, // null: unknown or unavailable
    sources: [], // GET v1/sources: the chain's sources, for those failing
    nodesCheckedAt: 0,
    nodesMissing: false,
    skew: 0, // server clock minus browser clock, in ms
    lastOK: 0,
    error: '',
    needToken: false,
    askedToken: false,
    rendered: '',
  };

  // ---- token ----------------------------------------------------------------
  const token = () => store.getItem('vigil.token') || '';
  const actor = () => {
    const name = (store.getItem('vigil.actor') || '').replace(/[\r\n]/g, ' ').trim();
    return name ? `${name} (status page)` : 'status page';
  };

  // ---- API ------------------------------------------------------------------
  class APIError extends Error {
    constructor(status, body) {
      const e = (body && body.error) || {};
      super(e.message || `the agent answered ${status}`);
      this.status = status;
      this.code = e.code || '';
      this.hint = e.hint || '';
    }
  }

  async function api(method, path, body) {
    const headers = { Accept: 'application/json' };
    if (token()) headers.Authorization = `Bearer ${token()}`;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (method !== 'GET') headers['X-Vigil-Actor'] = actor();
    let res;
    try {
      res = await fetch(path, {
        method, headers, cache: 'no-store', credentials: 'same-origin',
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err) {
      throw new APIError(0, { error: { message: `cannot reach the agent (${err.message})` } });
    }
    const date = Date.parse(res.headers.get('Date') || '');
    if (!Number.isNaN(date)) {
      const skew = date - Date.now();
      st.skew = Math.abs(skew) > 2000 ? skew : 0;
    }
    let data = null;
    try { data = await res.json(); } catch (_) { /* not JSON */ }
    if (!res.ok) throw new APIError(res.status, data);
    return data;
  }

  // ---- formatting -----------------------------------------------------------
  const now = () => Date.now() + st.skew;

  function ago(iso) {
    const t = Date.parse(iso);
    if (Number.isNaN(t)) return '';
    let s = Math.max(0, Math.floor((now() - t) / 1000));
    const d = Math.floor(s / 86400); s -= d * 86400;
    const h = Math.floor(s / 3600); s -= h * 3600;
    const m = Math.floor(s / 60); s -= m * 60;
    if (d) return `${d}d ${h}h`;
    if (h) return `${h}h ${m}m`;
    if (m) return `${m}m ${s}s`;
    return `${s}s`;
  }

  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'text') el.textContent = v;
      else if (k === 'data') Object.assign(el.dataset, v);
      else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
    for (const kid of kids.flat(Infinity)) {
      if (kid === null || kid === undefined || kid === false) continue;
      el.append(kid instanceof Node ? kid : String(kid));
    }
    return el;
  }

  // A time that counts up: the ticker rewrites every [data-ago] each second.
  function since(iso, suffix) {
    if (!iso) return h('span', { class: 'muted', text: '—' });
    const abs = new Date(iso);
    return h('time', { datetime: iso, title: abs.toLocaleString(), data: { ago: iso, suffix: suffix || '' } },
      ago(iso) + (suffix || ''));
  }

  // A time ahead that counts down: the ticker rewrites every [data-in].
  function inText(iso) {
    const t = Date.parse(iso);
    if (Number.isNaN(t)) return 'at a time unknown';
    const s = Math.round((t - now()) / 1000);
    if (s <= 0) return 'at the next round';
    if (s < 60) return `in ${s} s`;
    if (s < 3600) return `in ${Math.floor(s / 60)} min ${String(s % 60).padStart(2, '0')} s`;
    return `at ${new Date(t).toLocaleTimeString()}`;
  }

  function ahead(iso) {
    if (!iso) return h('span', { class: 'muted', text: 'at a time unknown' });
    return h('time', { datetime: iso, title: new Date(iso).toLocaleString(), data: { in: iso } }, inText(iso));
  }

  // What waits or moves beside the level (no hidden states): a failback
  // held by its dwell or waiting for an operator, a ramp's step, a drill.
  function waitingText(site) {
    const w = site.waiting;
    if (!w) return null;
    if (w.why === 'dwell') return [`failback to level ${w.level} `, ahead(w.until), ` (dwell): level ${w.level} is healthy`];
    return [`manual failback waiting: level ${w.level} is healthy; run `, h('code', null, w.command)];
  }

  function rampText(site) {
    const r = site.ramp;
    const step = r.step && r.steps ? `ramp step ${r.step}/${r.steps}: ` : '';
    return [`${step}${r.weight}% of new requests to level ${site.level}, the rest on level ${r.from}; next step `, ahead(r.next_step_at)];
  }

  // The dynamic update of the site's name (publish "dns_update").
  function dnsUpdateText(d) {
    switch (d.state) {
      case 'ok': return [`${d.name} ok: publication v${d.version} pushed `, since(d.at, ' ago')];
      case 'pending': return `${d.name}: not pushed yet`;
      case 'skipped': return `${d.name}: ${d.error || 'not pushed'}`;
      case 'standby': return `${d.name}: pushed by the cluster's leader, not this instance`;
    }
    const n = d.failures || 0;
    return [`${d.name} ${d.state} (publication v${d.version}, ${n} failed update${n === 1 ? '' : 's'} so far, last `,
      since(d.at, ' ago'), `): ${d.error || ''}`];
  }

  function badge(state) {
    const [icon, label] = STATES[state] || ['?', state || 'unknown'];
    return h('span', { class: `badge s-${label}` }, h('span', { class: 'icon', 'aria-hidden': 'true' }, icon), ' ', label);
  }

  function verdict(v) {
    const [icon, label] = VERDICTS[v] || ['·', v || 'none'];
    return h('span', { class: `verdict v-${label}` }, h('span', { class: 'icon', 'aria-hidden': 'true' }, icon), ' ', label);
  }

  function levelNumbers(site) {
    return Object.keys(site.levels || {}).map(Number).sort((a, b) => a - b);
  }

  // clientErrorUp is the 4xx status ("404") on which a voter of the last
  // round found the origin up, or '' when none did. A probe's detail
  // starts "HTTP 404 Not Found" (sdk/probe: the direct source, the nodes)
  // or "status 404" (dnspup); with expected_status set, a 4xx is a down
  // vote and needs no hint.
  function clientErrorUp(o) {
    for (const v of o.votes || []) {
      const m = v.value === 'up' && /^(?:HTTP|status) (4\d\d)\b/.exec(v.detail || '');
      if (m) return m[1];
    }
    return '';
  }

  function originsOf(site) {
    return Object.entries(site.origins || {})
      .map(([name, o]) => ({ name, ...o }))
      .sort((a, b) => a.level - b.level || a.name.localeCompare(b.name));
  }

  function describe(ev) {
    const e = ev.event || ev;
    switch (e.kind) {
      case 'origin_state':
        return [`Origin ${e.origin}: `, badge(e.from), ' → ', badge(e.to)];
      case 'level_switched':
        return [`Switched from level ${e.from} to level ${e.to} (${e.reason})`];
      case 'failback_available':
        return [`Level ${e.level} is healthy again: failback available (manual failback)`];
      case 'all_levels_unhealthy':
        return [`Every level is unhealthy; staying on level ${e.level}`];
      case 'ramp_step':
        return [e.weight >= 100 ? `Failback ramp over: all new requests on level ${e.level}`
          : `Failback ramp: ${e.weight}% of new requests to level ${e.level}, the rest on level ${e.from}`];
      default:
        return [e.kind || 'event'];
    }
  }

  function describeText(ev) {
    return describe(ev).map((p) => (p instanceof Node ? p.textContent : p)).join('').replace(/[●✕?–]\s/g, '');
  }

  // Gives a table explicit roles so it stays a table for assistive
  // technology when the phone layout displays its rows as blocks.
  function tableRoles(table) {
    table.setAttribute('role', 'table');
    for (const g of table.querySelectorAll('thead, tbody')) g.setAttribute('role', 'rowgroup');
    for (const r of table.querySelectorAll('tr')) r.setAttribute('role', 'row');
    for (const c of table.querySelectorAll('th[scope=col]')) c.setAttribute('role', 'columnheader');
    for (const c of table.querySelectorAll('th[scope=row]')) c.setAttribute('role', 'rowheader');
    for (const c of table.querySelectorAll('td')) c.setAttribute('role', 'cell');
    return table;
  }

  // ---- routing --------------------------------------------------------------
  function route() {
    const m = /^#\/site\/(.+)$/.exec(window.location.hash);
    if (m) {
      try { return decodeURIComponent(m[1]); } catch (_) { return m[1]; }
    }
    return null;
  }

  // ---- rendering ------------------------------------------------------------
  // Action buttons carry what they do in data attributes; one listener on
  // the document runs them, so a re-render never leaves a stale handler.
  function actionButton(label, data) {
    return h('button', { type: 'button', class: 'act', data }, label);
  }

  // morph makes the live DOM node old look like the freshly built node neu,
  // changing only what differs. Keeping the nodes keeps focus, hover, text
  // selection and a click in progress across the live updates.
  function morph(old, neu) {
    if (old.nodeType !== neu.nodeType || old.nodeName !== neu.nodeName ||
        (old.nodeType === Node.ELEMENT_NODE && old.dataset.key !== neu.dataset.key)) {
      old.replaceWith(neu);
      return;
    }
    if (old.nodeType !== Node.ELEMENT_NODE) {
      if (old.nodeValue !== neu.nodeValue) old.nodeValue = neu.nodeValue;
      return;
    }
    for (const a of [...old.attributes]) if (!neu.hasAttribute(a.name)) old.removeAttribute(a.name);
    for (const a of [...neu.attributes]) if (old.getAttribute(a.name) !== a.value) old.setAttribute(a.name, a.value);
    morphChildren(old, [...neu.childNodes]);
  }

  function morphChildren(parent, kids) {
    const olds = [...parent.childNodes];
    kids.forEach((k, i) => (i < olds.length ? morph(olds[i], k) : parent.append(k)));
    for (let i = kids.length; i < olds.length; i++) olds[i].remove();
  }

  function renderSite(site, idx, detail) {
    const id = `site-${idx}`;
    const canAct = !!token();
    const levels = levelNumbers(site);
    const top = levels[0];
    const cur = site.level;
    const curHealth = (site.levels || {})[String(cur)] || 'unknown';
    const sec = h('section', { class: `site${detail ? ' detail' : ''}`, 'aria-labelledby': `${id}-title`, data: { site: site.site } });

    const title = detail
      ? h('h2', { id: `${id}-title`, tabindex: '-1', data: { key: `site:${site.site}` } }, `${site.site}`)
      : h('h2', { id: `${id}-title`, tabindex: '-1', data: { key: `site:${site.site}` } },
        h('a', { href: `#/site/${encodeURIComponent(site.site)}`, data: { key: `open:${site.site}` } }, site.site));
    sec.append(h('div', { class: 'site-head' },
      title,
      h('p', { class: 'host' }, site.hostname),
      h('p', { class: 'cur-level', data: { health: curHealth } }, 'On level ', h('strong', { class: 'level-no' }, String(cur)), ' ', badge(curHealth))));

    const probing = site.probing === 'active'
      ? ['active', site.last_probe ? [' · last probe ', since(site.last_probe, ' ago')] : ' · not probed yet']
      : ['paused: ', site.paused_why || 'no reason given'];
    sec.append(h('dl', { class: 'facts' },
      h('div', null, h('dt', null, 'Failback'), h('dd', { class: 'failback' }, `${site.failback} (configured)`)),
      h('div', null, h('dt', null, 'Manual hold'), h('dd', { class: 'hold', data: { hold: String(!!site.manual_hold) } }, site.manual_hold
        ? `held on level ${cur} by a manual switch: failback is manual until someone switches to level ${top}` : 'none')),
      h('div', null, h('dt', null, 'Health checks'), h('dd', { data: { probing: site.probing } }, probing)),
      h('div', null, h('dt', null, 'Round'), h('dd', null, site.round ? String(site.round) : '—')),
      site.ramp ? h('div', null, h('dt', null, 'Failback ramp'), h('dd', { class: 'ramp', data: { weight: String(site.ramp.weight), step: String(site.ramp.step || '') } },
        rampText(site))) : null,
      site.waiting ? h('div', null, h('dt', null, 'Failback waiting'), h('dd', { class: 'waiting', data: { why: site.waiting.why, level: String(site.waiting.level) } },
        waitingText(site))) : null,
      site.drill ? h('div', null, h('dt', null, 'Drill'), h('dd', { class: 'drill', data: { level: String(site.drill.level) } },
        `level ${site.drill.level} drilled (voted down) until `, ahead(site.drill.until))) : null,
      site.dns_update ? h('div', null, h('dt', null, 'DNS update'), h('dd', { class: 'dns-update', data: { state: site.dns_update.state } },
        dnsUpdateText(site.dns_update))) : null));

    // Levels.
    const lvList = h('ul', { class: 'levels', 'aria-label': `Levels of ${site.site}` });
    for (const l of levels) {
      const health = site.levels[String(l)];
      const isCur = l === cur;
      lvList.append(h('li', { class: `level${isCur ? ' current' : ''}`, data: { level: l, health } },
        h('span', { class: 'lv' }, `Level ${l}`), ' ', badge(health),
        isCur ? h('span', { class: 'tag' }, '◆ current') : null,
        canAct && !isCur ? actionButton(`Switch to level ${l}`,
          { key: `switch:${site.site}:${l}`, action: 'switch', site: site.site, level: l }) : null));
    }
    sec.append(h('h3', null, 'Levels'), lvList);

    // Origins.
    const cols = ['Origin', 'Level', 'State', 'Counter', 'Last verdict', 'Settled by', 'Reason', 'Changed'];
    if (canAct) cols.push('Action');
    const thead = h('thead', null, h('tr', null, cols.map((c) => h('th', { scope: 'col' }, c))));
    const tbody = h('tbody');
    for (const o of originsOf(site)) {
      const by = o.by ? o.by : (o.state === 'disabled' ? '—' : 'no source');
      const row = h('tr', { data: { origin: o.name, state: o.state } },
        h('th', { scope: 'row' }, h('span', { class: 'oname' }, o.name), h('span', { class: 'addr' }, o.address)),
        h('td', { 'data-label': 'Level' }, String(o.level)),
        h('td', { 'data-label': 'State', class: 'state' }, badge(o.state)),
        h('td', { 'data-label': 'Counter', class: 'counter', title: counterTitle(o, site) }, counter(o, site), meter(o, site)),
        h('td', { 'data-label': 'Last verdict', class: 'verdict-cell' }, o.state === 'disabled' ? h('span', { class: 'muted' }, '—') : verdict(o.verdict)),
        h('td', { 'data-label': 'Settled by', class: 'by' }, by),
        h('td', { 'data-label': 'Reason', class: 'reason' }, o.reason || h('span', { class: 'muted' }, '—')),
        h('td', { 'data-label': 'Changed', class: 'since' }, o.since ? since(o.since, ' ago') : h('span', { class: 'muted' }, '—')));
      if (canAct) {
        const disabled = o.state === 'disabled';
        const action = disabled ? 'enable' : 'disable';
        row.append(h('td', { 'data-label': 'Action' }, actionButton(
          [disabled ? 'Enable' : 'Disable', h('span', { class: 'vh' }, ` ${o.name}`)],
          { key: `${action}:${site.site}:${o.name}`, action, site: site.site, origin: o.name })));
      }
      tbody.append(row);
    }
    const table = tableRoles(h('table', { class: 'origins' },
      h('caption', { class: 'vh' }, `Origins of ${site.site}`), thead, tbody));
    sec.append(h('h3', null, 'Origins'), h('div', { class: 'scroll' }, table));
    for (const o of originsOf(site)) {
      const code = clientErrorUp(o);
      if (code) {
        sec.append(h('p', { class: 'warn hint', data: { origin: o.name } },
          h('strong', null, `${o.name}: HTTP ${code} counts as up: is the health path right?`),
          ' A status below 500 is up unless the site lists the ones it expects: ',
          h('code', null, 'health_check { expected_status = [200] }'), '.'));
      }
    }

    if (st.history[site.site]) sec.append(renderHistory(site));
    if (detail) sec.append(renderVotes(site));
    else sec.append(h('p', { class: 'more' }, h('a', { href: `#/site/${encodeURIComponent(site.site)}` }, `Votes and events of ${site.site} `, h('span', { 'aria-hidden': 'true' }, '→'))));
    return sec;
  }

  function renderVotes(site) {
    const nodeIDs = new Set((st.nodes || []).map((n) => n.id));
    const box = h('div', { class: 'votes' }, h('h3', null, 'Votes of the last round'));
    for (const o of originsOf(site)) {
      const votes = o.votes || [];
      const asked = (o.asked || []).length ? `asked: ${o.asked.join(', ')}` : 'not asked';
      box.append(h('h4', null, `${o.name} `, h('span', { class: 'muted' }, `(${asked})`)));
      if (!votes.length) {
        box.append(h('p', { class: 'muted' }, o.state === 'disabled' ? 'Disabled: not probed.' : 'No votes.'));
        continue;
      }
      const rows = votes.map((v) => h('tr', { data: { voter: v.voter } },
        h('th', { scope: 'row' }, v.voter, nodeIDs.has(v.voter) ? h('span', { class: 'tag' }, 'node') : null),
        h('td', { 'data-label': 'Source' }, v.source),
        h('td', { 'data-label': 'Vote' }, verdict(v.value)),
        h('td', { 'data-label': 'Reason' }, v.plugin_reason ? `${v.reason} ${v.plugin_reason}` : v.reason, v.detail ? h('span', { class: 'vote-detail' }, ` ${v.detail}`) : null),
        h('td', { 'data-label': 'Latency', class: 'num' }, v.latency_ms ? `${v.latency_ms.toFixed(1)} ms` : '—')));
      box.append(h('div', { class: 'scroll' }, tableRoles(h('table', { class: 'votes-table' },
        h('caption', { class: 'vh' }, `Votes for ${o.name}`),
        h('thead', null, h('tr', null, ['Voter', 'Source', 'Vote', 'Reason', 'Latency'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', null, rows)))));
    }
    return box;
  }

  function renderEvents() {
    const site = route();
    const sec = $('events-section');
    sec.hidden = !site;
    if (!site) return;
    const body = $('events-body');
    morphChildren(body, st.events.slice().reverse().map((ev) => h('tr', { data: { key: `ev:${ev.seq}` } },
      h('td', null, since(ev.time, ' ago')),
      h('td', null, describe(ev)),
      h('td', null, ev.actor || 'vigil'),
      h('td', { class: 'num' }, ev.round ? String(ev.round) : '—'))));
    $('events-empty').hidden = st.events.length > 0;
  }

  function renderNodes() {
    const sec = $('nodes-section');
    sec.hidden = st.nodes === null;
    if (st.nodes === null) return;
    $('nodes-title').textContent = `Nodes: ${st.nodes.length} online${st.offline.length ? `, ${st.offline.length} offline` : ''}`;
    const row = (n, online) => h('tr', { data: { node: n.id, key: `node:${n.id}`, state: online ? 'online' : 'offline' } },
      h('th', { scope: 'row' }, n.id),
      h('td', null, online ? 'online' : h('span', { class: 'offline', title: n.detail || '' }, '✕ offline')),
      h('td', null, n.source || '—'),
      h('td', null, Object.entries(n.labels || {}).map(([k, v]) => h('span', { class: 'label' }, `${k}=${v}`))),
      h('td', null, n.last_seen ? since(n.last_seen, ' ago') : '—'));
    morphChildren($('nodes-body'), [...st.nodes.map((n) => row(n, true)), ...st.offline.map((n) => row(n, false))]);
    $('nodes-empty').hidden = st.nodes.length + st.offline.length > 0;
  }

  // The summary bar: the fleet by status (each a filter), the sites off
  // their top level, with every level unhealthy, and waiting for a manual
  // failback; then the filter buttons.
  const SEVERITY = ['down', 'failed_over', 'degraded', 'paused', 'unknown', 'ok'];
  const PROBLEMS = ['down', 'failed_over', 'degraded', 'paused'];
  const STATUS_ICONS = { down: '✕', failed_over: '⇣', degraded: '◐', paused: '‖', unknown: '?', ok: '●' };

  function setFilter(f) {
    st.filter = f;
    st.problemOnly = f === 'problems';
    st.limit = SITES_PAGE;
    refresh();
  }

  function renderSummary() {
    const c = st.counts || {};
    const sum = st.summary;
    const fleet = sum ? sum.sites : Object.values(c).reduce((a, b) => a + b, 0);
    const attention = PROBLEMS.reduce((a, k) => a + (c[k] || 0), 0);
    const chip = (k) => h('button', {
      type: 'button', class: `count st-${k}`, 'aria-pressed': String(st.filter === k),
      data: { key: `count:${k}`, count: k, n: String(c[k] || 0) }, onclick: () => setFilter(st.filter === k ? 'all' : k),
      title: `Show only the ${STATUS_WORDS[k]} sites`,
    }, h('span', { class: 'icon', 'aria-hidden': 'true' }, STATUS_ICONS[k]), ` ${c[k] || 0} ${STATUS_WORDS[k]}`);
    const fact = (k, n, label, title) => h('p', { class: `fact${n ? ' lit' : ''}`, data: { fact: k, n: String(n) }, title }, h('strong', null, String(n)), ` ${label}`);
    const facts = sum ? [
      fact('off_top_level', sum.off_top_level, 'off the top level', 'Sites on a level other than their top one'),
      fact('all_unhealthy', sum.all_unhealthy, 'all levels unhealthy', 'Sites whose every level is unhealthy: nothing healthy to serve'),
      fact('failback_waiting', sum.failback_waiting, 'failback waiting', 'Off the top level, the top level healthy again, failback manual: a switch back is awaited'),
    ] : [];
    return h('div', { class: 'summary', id: 'summary' },
      h('p', { id: 'fleet-summary', data: { n: String(fleet) } }, h('strong', null, String(fleet)), ` site${fleet === 1 ? '' : 's'}`),
      h('div', { class: 'counts', role: 'group', 'aria-label': 'Sites by status' }, SEVERITY.map(chip)),
      h('div', { class: 'facts-bar' }, facts),
      h('div', { class: 'filter', role: 'group', 'aria-label': 'Which sites' },
        h('button', { type: 'button', 'aria-pressed': String(st.filter === 'all'), data: { key: 'filter-all' }, onclick: () => setFilter('all') }, 'All sites, problems first'),
        h('button', { type: 'button', 'aria-pressed': String(st.filter === 'problems'), data: { key: 'filter-problem' }, onclick: () => setFilter('problems') },
          `Needs attention (${attention})`)));
  }

  // ---- compact rows ---------------------------------------------------------
  const SVG = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs, ...kids) {
    const el = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') el.setAttribute('class', v);
      else if (k === 'data') Object.assign(el.dataset, v);
      else el.setAttribute(k, String(v));
    }
    for (const kid of kids.flat(Infinity)) if (kid) el.append(kid);
    return el;
  }

  function expanded(name) {
    return st.expanded.has(name) || (st.summary ? st.summary.sites : st.total) <= AUTO_OPEN;
  }

  function renderRow(site, idx) {
    const open = expanded(site.site);
    const origins = originsOf(site);
    const row = h('section', { class: 'site-row', data: { site: site.site, status: site.status, expanded: String(open) }, 'aria-label': `Site ${site.site}` },
      h('div', { class: 'row-line' },
        h('button', {
          type: 'button', class: 'expand', 'aria-expanded': String(open), data: { key: `expand:${site.site}`, expand: site.site },
        }, h('span', { class: 'chev', 'aria-hidden': 'true' }, open ? '▾' : '▸'), ' ', h('span', { class: 'rname' }, site.site)),
        h('span', { class: `status st-${site.status}` }, h('span', { class: 'icon', 'aria-hidden': 'true' }, STATUS_ICONS[site.status] || '?'), ` ${STATUS_WORDS[site.status] || site.status}`),
        h('span', { class: 'rlevel' }, `level ${site.level}`,
          site.ramp ? h('span', { class: 'rnote', data: { note: 'ramp' } }, ` · ramp ${site.ramp.weight}% to level ${site.level}`) : null,
          site.waiting ? h('span', { class: 'rnote', data: { note: site.waiting.why } }, site.waiting.why === 'dwell'
            ? ` · failback to level ${site.waiting.level} after its dwell` : ` · manual failback to level ${site.waiting.level} waiting`) : null,
          site.drill ? h('span', { class: 'rnote', data: { note: 'drill' } }, ` · drill of level ${site.drill.level}`) : null),
        h('span', { class: 'rhost' }, site.hostname),
        h('span', { class: 'chips' }, origins.map((o) => h('span', {
          class: `chip s-${(STATES[o.state] || [])[1] || o.state}`, data: { origin: o.name, state: o.state }, title: `${o.name}: ${o.state}, ${counter(o, site)}`,
        }, h('span', { class: 'icon', 'aria-hidden': 'true' }, (STATES[o.state] || ['?'])[0]), ` ${o.name}`)))));
    if (open) row.append(renderSite(site, idx, false));
    return row;
  }

  // ---- history ----------------------------------------------------------------
  // renderHistory draws, per origin, the last rounds' verdicts as a strip,
  // the uptimes and a latency sparkline, from GET v1/sites/{site}/history.
  function renderHistory(site) {
    const got = st.history[site.site];
    const box = h('div', { class: 'history', data: { history: site.site } }, h('h3', null, 'History'));
    if (!got) return box.append(h('p', { class: 'muted' }, 'Loading history…')), box;
    const d = got.data;
    if (!d || !d.kept) {
      box.append(h('p', { class: 'muted no-history' }, `No history: ${(d && d.note) || 'this agent keeps none'}.`));
      return box;
    }
    const rows = originsOf(site).map((o) => {
      const oh = (d.origins || {})[o.name] || { recent: [] };
      return h('tr', { data: { origin: o.name } },
        h('th', { scope: 'row' }, o.name),
        h('td', { 'data-label': `Last ${d.rounds} rounds`, class: 'strip' }, strip(oh.recent || [], d.rounds)),
        h('td', { 'data-label': 'Uptime 1h · 24h · 7d', class: 'uptime' }, uptimes(oh)),
        h('td', { 'data-label': 'Latency', class: 'latency' }, spark(oh.recent || [])),
        h('td', { 'data-label': 'Counter', class: 'meter-cell' }, meter(o, site), ' ', counter(o, site)));
    });
    box.append(h('div', { class: 'scroll' }, tableRoles(h('table', { class: 'history-table' },
      h('caption', { class: 'vh' }, `History of ${site.site}`),
      h('thead', null, h('tr', null, ['Origin', `Last ${d.rounds} rounds (oldest left)`, 'Uptime 1h · 24h · 7d', 'Latency', 'Counter'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', null, rows)))));
    return box;
  }

  // uptimes: the 1 h, 24 h and 7 d uptimes, each over a window the
  // history covers; the windows longer than the data it holds show one
  // value with how much data that is ("99.2% over 31 min of data"), not
  // the same number as if it covered each window.
  function uptimes(oh) {
    const windows = [[3600, oh.uptime_1h], [86400, oh.uptime_24h], [7 * 86400, oh.uptime_7d]];
    const since = oh.data_since ? Date.parse(oh.data_since) : NaN;
    const have = Number.isNaN(since) ? Infinity : Math.max(0, (now() - since) / 1000);
    const out = [];
    for (const [secs, v] of windows) {
      if (out.length) out.push(' · ');
      if (have + 60 >= secs) { out.push(pct(v)); continue; }
      out.push(h('span', { class: 'partial', data: { covered: String(Math.round(have)) }, title: `the history holds ${dataSpan(have)} of data, less than this window` },
        pct(v), ` over ${dataSpan(have)} of data`));
      break;
    }
    return out;
  }

  function dataSpan(secs) {
    const m = Math.floor(secs / 60);
    if (m < 1) return `${Math.floor(secs)} s`;
    if (m < 120) return `${m} min`;
    const hrs = Math.floor(m / 60);
    if (hrs < 48) return `${hrs} h`;
    return `${Math.floor(hrs / 24)} d`;
  }

  function pct(v) {
    if (v === null || v === undefined) return h('span', { class: 'muted', title: 'no judged round in the window' }, '—');
    const t = v >= 99.995 ? '100%' : `${v.toFixed(v >= 99 ? 2 : 1)}%`;
    return h('span', { class: v < 99 ? 'low' : null }, t);
  }

  // strip: one bar per kept round, down tall and red, up short and green,
  // none a dot; empty slots on the left until the ring is full.
  function strip(points, rounds) {
    const w = 5, gap = 1, H = 18;
    const n = Math.max(rounds, points.length);
    const pad = n - points.length;
    const up = points.filter((p) => p.verdict === 'up').length;
    const down = points.filter((p) => p.verdict === 'down').length;
    const bars = [];
    for (let i = 0; i < n; i++) {
      const p = i >= pad ? points[i - pad] : null;
      const v = p ? p.verdict : 'empty';
      const bh = v === 'down' ? H : v === 'up' ? H * 0.6 : v === 'none' ? 4 : 2;
      const r = svg('rect', { x: i * (w + gap), y: H - bh, width: w, height: bh, class: `hv hv-${v}`, data: p ? { verdict: v } : null });
      if (p) r.append(svg('title', null, `${new Date(p.time).toLocaleTimeString()}: ${v}${p.latency_ms ? `, ${p.latency_ms} ms` : ''} (${p.state})`));
      bars.push(r);
    }
    return svg('svg', {
      class: 'strip-svg', width: n * (w + gap), height: H, viewBox: `0 0 ${n * (w + gap)} ${H}`, role: 'img',
      'aria-label': `last ${points.length} rounds: ${up} up, ${down} down`, data: { up: String(up), down: String(down), points: String(points.length) },
    }, bars);
  }

  function spark(points) {
    const lat = points.filter((p) => p.verdict !== 'none').map((p) => p.latency_ms || 0);
    if (!lat.length) return h('span', { class: 'muted' }, '—');
    const W = 120, H = 18;
    const max = Math.max(...lat, 0.1);
    const step = lat.length > 1 ? W / (lat.length - 1) : 0;
    const pts = lat.map((v, i) => `${(i * step).toFixed(1)},${(H - 1 - (v / max) * (H - 2)).toFixed(1)}`).join(' ');
    return h('span', { class: 'spark' }, svg('svg', { class: 'spark-svg', width: W, height: H, viewBox: `0 0 ${W} ${H}`, 'aria-hidden': 'true' },
      svg('polyline', { points: pts, class: 'spark-line' })),
    ` ${lat[lat.length - 1].toFixed(1)} ms`, h('span', { class: 'muted small' }, ` (max ${max.toFixed(1)})`));
  }

  // meter: the consecutive counter as pips against its threshold.
  function meter(o, site) {
    const t = site.thresholds || {};
    if (o.state === 'disabled') return null;
    const bad = o.failures > 0;
    const of = bad ? t.unhealthy : t.healthy;
    const n = bad ? o.failures : o.successes;
    if (!of) return null;
    return svg('svg', { class: `meter ${bad ? 'm-bad' : 'm-good'}`, width: of * 8, height: 8, viewBox: `0 0 ${of * 8} 8`, 'aria-hidden': 'true' },
      Array.from({ length: of }, (_, i) => svg('rect', { x: i * 8, y: 0, width: 6, height: 8, rx: 1, class: i < n ? 'pip on' : 'pip' })));
  }

  async function loadHistory(sites) {
    await Promise.all(sites.map(async (s) => {
      const got = st.history[s.site];
      if (got && got.round === s.round && got.data) return;
      try {
        const data = await api('GET', `v1/sites/${encodeURIComponent(s.site)}/history`);
        st.history[s.site] = { round: s.round, data };
      } catch (err) {
        st.history[s.site] = { round: s.round, data: { kept: false, note: err.status === 404 ? 'this agent has no history endpoint' : err.message } };
      }
    }));
  }

  function render(force) {
    const site = route();
    const key = JSON.stringify([site, !!token(), st.sites, st.nodes, st.sources, st.offline, st.counts, st.more, st.filter, st.summary,
      [...st.expanded], Object.entries(st.history).map(([k, v]) => [k, v.round, !!v.data]),
      st.events.length && st.events[st.events.length - 1].seq]);
    if (!force && key === st.rendered) return;
    st.rendered = key;
    const active = document.activeElement;
    const focused = active && active.dataset ? active.dataset.key : null;
    const focusedSite = active && active.closest ? (active.closest('[data-site]') || { dataset: {} }).dataset.site : null;

    $('crumbs').hidden = !site;
    $('crumb-site').textContent = site || '';
    $('page-title').textContent = site ? `Site ${site}` : 'Sites';
    document.title = `${site ? `${site} · ` : ''}${document.querySelector('.name a').textContent} status`;

    let content;
    if (!st.loaded) {
      content = h('p', { class: 'muted' }, st.needToken ? 'This agent needs its API token to show anything.' : 'Loading sites…');
    } else if (site) {
      const idx = st.sites.findIndex((s) => s.site === site);
      content = idx < 0
        ? h('p', { class: 'error' }, `There is no site ${site} on this agent. `, h('a', { href: '#/' }, 'See all sites.'))
        : renderSite(st.sites[idx], idx, true);
    } else if (!st.sites.length && st.filter === 'all' && !st.search) {
      content = h('p', { class: 'muted' }, 'This agent has no sites configured.');
    } else {
      content = h('div', null, renderSummary(),
        st.sites.length ? h('div', { class: 'rows', id: 'rows' }, st.sites.map((s, i) => renderRow(s, i)))
          : h('p', { class: 'muted', id: 'no-match' }, st.search ? `No site starts with ${st.search}${st.filter === 'all' ? '' : ' among these'}.` : 'No site needs attention.'),
        st.more ? h('p', { class: 'more' }, h('button', {
          type: 'button', data: { key: 'more' },
          onclick: () => { st.limit += SITES_PAGE; refresh(); },
        }, `Show ${Math.min(SITES_PAGE, st.total - st.sites.length)} more of ${st.total}`)) : null);
    }
    $('search-box').hidden = !!site;
    morphChildren($('sites'), [content]);
    renderEvents();
    renderNodes();
    renderSources();
    if (focused && (!document.activeElement || document.activeElement === document.body)) {
      // The update removed the focused control (a switch button of the level
      // that is now current): focus its site's heading, not the page's start.
      const el = document.querySelector(`[data-key="${CSS.escape(focused)}"]`) ||
        (focusedSite && document.querySelector(`[data-key="${CSS.escape(`site:${focusedSite}`)}"]`));
      if (el) el.focus();
    }
  }

  // ---- status line and ticking times ------------------------------------------
  function renderConn() {
    const p = $('conn');
    let state, icon, text;
    if (st.needToken && !st.loaded) {
      [state, icon, text] = ['locked', '🔒', 'Token needed to read'];
    } else if (st.error) {
      [state, icon, text] = ['down', '✕', `Disconnected: ${st.error}. Retrying…`];
    } else if (st.lastOK) {
      [state, icon, text] = ['live', '●', `Live · updated ${ago(new Date(st.lastOK + st.skew).toISOString())} ago`];
    } else {
      [state, icon, text] = ['connecting', '…', 'Connecting…'];
    }
    p.dataset.state = state;
    p.querySelector('.dot').textContent = icon;
    // What cannot be refreshed is greyed out, with the time it is from:
    // a page that shows a green site while disconnected tells a lie.
    const stale = state === 'down' && st.loaded;
    document.body.dataset.stale = String(stale);
    if (stale && st.lastOK) text += ` What is shown is from ${ago(new Date(st.lastOK + st.skew).toISOString())} ago.`;
    $('conn-text').textContent = text;
  }

  function tick() {
    for (const el of document.querySelectorAll('[data-ago]')) {
      el.textContent = ago(el.dataset.ago) + (el.dataset.suffix || '');
    }
    for (const el of document.querySelectorAll('[data-in]')) {
      el.textContent = inText(el.dataset.in);
    }
    renderConn();
  }

  function announce(text) {
    const live = $('live');
    live.append(h('p', null, text));
    while (live.childElementCount > 5) live.firstElementChild.remove();
  }

  function notice(text) {
    const n = $('notice');
    n.hidden = !text;
    n.textContent = text || '';
  }

  function tokenState() {
    $('token-state').textContent = token() ? '✓ Operator actions on' : 'Read only';
    $('token-button').textContent = token() ? 'Change token' : 'Enter token';
  }

  // ---- reading --------------------------------------------------------------
  function failed(err) {
    if (err.status === 401) {
      st.needToken = true;
      st.error = '';
      notice(`${err.message}${token() ? ' The token in use was refused.' : ''}`);
      if (!st.askedToken) {
        st.askedToken = true;
        openToken('This agent needs its API token even to show its status.');
      }
    } else {
      st.error = err.message;
    }
    renderConn();
  }

  let refreshing = null;
  let again = false;
  async function refresh() {
    if (refreshing) { again = true; return refreshing; }
    refreshing = (async () => {
      do {
        again = false;
        try {
          const site = route();
          if (site) {
            try {
              st.sites = [await api('GET', `v1/sites/${encodeURIComponent(site)}`)];
              await loadHistory(st.sites);
            } catch (err) {
              if (err.status !== 404) throw err;
              st.sites = [];
            }
          } else {
            await refreshList();
          }
          st.loaded = true;
          st.needToken = false;
          st.error = '';
          st.lastOK = Date.now();
          if ($('notice').textContent.startsWith('reads need')) notice('');
          await refreshNodes();
          await refreshSources();
          render(false);
        } catch (err) {
          failed(err);
          if (!st.loaded) render(true);
        }
      } while (again);
      refreshing = null;
      renderConn();
    })();
    return refreshing;
  }

  // refreshList reads the list: with the filter 'all' the sites that need
  // attention first (worst first), then the others, up to st.limit; a
  // status or 'problems' filter reads only those. Only the rows that are
  // open read their history.
  async function refreshList() {
    const pre = st.search ? `&prefix=${encodeURIComponent(st.search)}` : '';
    const ask = (q, limit) => api('GET', `v1/sites?limit=${limit}${q}${pre}`);
    const bySeverity = (a, b) => SEVERITY.indexOf(a.status) - SEVERITY.indexOf(b.status) || a.site.localeCompare(b.site);
    let sites = [], total = 0, more = false, data;
    if (st.filter === 'all') {
      data = await ask(`&status=${PROBLEMS.join(',')}`, st.limit);
      sites = (data.sites || []).sort(bySeverity);
      total = data.total;
      more = !!data.next_cursor;
      const rest = await ask('&status=unknown,ok', Math.max(1, st.limit - sites.length));
      total += rest.total;
      if (sites.length < st.limit) {
        sites = sites.concat((rest.sites || []).sort(bySeverity));
        more = more || !!rest.next_cursor;
      } else {
        more = more || rest.total > 0;
      }
    } else {
      data = await ask(st.filter === 'problems' ? '&problem=true' : `&status=${st.filter}`, st.limit);
      sites = (data.sites || []).sort(bySeverity);
      total = data.total;
      more = !!data.next_cursor;
    }
    try {
      st.summary = await api('GET', 'v1/summary');
    } catch (err) {
      if (err.status !== 404) throw err;
      st.summary = null;
    }
    st.sites = sites;
    st.round = data.round;
    st.total = total === undefined ? sites.length : total;
    st.counts = data.counts || null;
    st.more = more;
    await loadHistory(sites.filter((s) => expanded(s.site)));
  }

  async function refreshNodes() {
    if (st.nodesMissing && Date.now() - st.nodesCheckedAt < NODES_RETRY_MS) return;
    st.nodesCheckedAt = Date.now();
    try {
      const data = await api('GET', 'v1/nodes');
      st.nodes = (data.nodes || []).slice().sort((a, b) => String(a.id).localeCompare(String(b.id)));
      st.offline = (data.offline || []).slice().sort((a, b) => String(a.id).localeCompare(String(b.id)));
      st.nodesMissing = false;
    } catch (err) {
      if (err.status === 404) { st.nodes = null; st.nodesMissing = true; }
      // other errors: keep what we had; v1/sites reports the connection
    }
  }

  // refreshSources reads the chain's sources; an agent without v1/sources,
  // or an error, leaves the banner as it was (v1/sites reports the
  // connection).
  async function refreshSources() {
    try {
      const data = await api('GET', 'v1/sources');
      st.sources = data.sources || [];
    } catch (err) {
      if (err.status === 404) st.sources = [];
    }
  }

  // renderSources shows the banner of the vote sources that failed the
  // latest round that asked them, each with its error.
  function renderSources() {
    const failing = st.sources.filter((s) => s.failing_rounds > 0);
    $('sources-trouble').hidden = failing.length === 0;
    $('sources-trouble-title').textContent = failing.length === 1 ? 'A vote source is failing' : `${failing.length} vote sources are failing`;
    morphChildren($('sources-trouble-list'), failing.map((s) => h('li', { data: { source: s.name } },
      h('span', { class: 'icon', 'aria-hidden': 'true' }, '✕'), ' ',
      h('strong', { text: s.name }),
      `: failed ${s.failing_rounds === 1 ? 'the last round' : `the last ${s.failing_rounds} rounds`}`,
      ` (${s.recent_failures} of its last ${s.recent_rounds}), last error `,
      since(s.last_error_at, ' ago'), ': ',
      h('span', { class: 'source-error', text: s.last_error || 'unknown' }))));
  }

  // Reads the journal from after to its end, page by page.
  async function readAll(after, site, keep) {
    let out = [];
    for (let page = 0; page < 20; page++) {
      const q = `v1/events?after=${after}&limit=${PAGE}${site ? `&site=${encodeURIComponent(site)}` : ''}`;
      const data = await api('GET', q);
      const evs = data.events || [];
      if (evs.length) after = evs[evs.length - 1].seq;
      out = out.concat(evs).slice(-keep);
      if (evs.length < PAGE) break;
    }
    return { events: out, last: after };
  }

  async function loadSiteEvents() {
    const site = route();
    st.eventsFor = site;
    st.events = [];
    if (!site) return;
    try {
      const { events } = await readAll(0, site, EVENTS_KEPT);
      if (st.eventsFor === site) st.events = events;
    } catch (err) {
      if (err.status !== 404) failed(err);
    }
  }

  // The watcher sleeps between failed attempts; a new token wakes it.
  let wake = () => {};
  const sleep = (ms) => new Promise((r) => {
    const timer = setTimeout(r, ms);
    wake = () => { clearTimeout(timer); r(); };
  });

  // Follows the journal: returns at once when something happened.
  async function watch() {
    let backoff = 1000;
    for (;;) {
      try {
        if (!st.caughtUp) {
          const { last } = await readAll(st.lastSeq, null, 1);
          st.lastSeq = last;
          st.caughtUp = true;
        }
        const data = await api('GET', `v1/events?after=${st.lastSeq}&limit=500&wait=25s`);
        const evs = data.events || [];
        backoff = 1000;
        if (!evs.length) continue;
        st.lastSeq = evs[evs.length - 1].seq;
        const site = route();
        for (const ev of evs) {
          if (!site || ev.site === site) announce(`${ev.site}: ${describeText(ev)}`);
          if (site && ev.site === site && st.eventsFor === site) st.events.push(ev);
        }
        if (st.events.length > EVENTS_KEPT) st.events = st.events.slice(-EVENTS_KEPT);
        await refresh();
      } catch (err) {
        failed(err);
        const t0 = Date.now();
        await sleep(backoff);
        backoff = Date.now() - t0 < backoff ? 1000 : Math.min(backoff * 2, 30000);
      }
    }
  }

  // counter is an origin's consecutive count against its threshold, as
  // "1/3 failed": how close its state is to changing.
  function counter(o, site) {
    const t = site.thresholds || {};
    if (o.state === 'disabled') return '—';
    if (o.failures > 0) return `${o.failures}/${t.unhealthy} failed`;
    if (o.successes > 0) return `${o.successes}/${t.healthy} good`;
    return '—';
  }

  function counterTitle(o, site) {
    const t = site.thresholds || {};
    return `${t.unhealthy} failed rounds in a row make an origin unhealthy; ${t.healthy} good ones make it healthy`;
  }

  // ---- dialogs --------------------------------------------------------------
  let returnKey = null;
  let pending = null;

  function openDialog(dlg, invoker) {
    returnKey = invoker && invoker.dataset ? invoker.dataset.key || null : null;
    dlg.showModal();
  }

  function restoreFocus(fallbackSite) {
    let el = returnKey ? document.querySelector(`[data-key="${CSS.escape(returnKey)}"]`) : null;
    if (!el && fallbackSite) el = document.querySelector(`[data-key="${CSS.escape(`site:${fallbackSite}`)}"]`);
    if (!el) el = $('page-title');
    el.focus();
    returnKey = null;
  }

  // showConfirm asks before an action. force, when given, is the action
  // forced past the agent's maintenance guard: offered only after the
  // agent refused the plain one with last_enabled_origin.
  function showConfirm(title, text, extra, okLabel, run, site, force) {
    $('confirm-title').textContent = title;
    $('confirm-text').textContent = text;
    $('confirm-extra').textContent = extra || '';
    $('confirm-extra').hidden = !extra;
    $('confirm-error').hidden = true;
    $('confirm-ok').textContent = okLabel;
    $('confirm-ok').disabled = false;
    delete $('confirm-ok').dataset.forced;
    pending = { run, site, force };
    openDialog($('confirm'), document.activeElement);
    $('confirm-cancel').focus();
  }

  function findSite(name) { return st.sites.find((s) => s.site === name); }

  function confirmSwitch(name, to) {
    const site = findSite(name);
    if (!site) return;
    const levels = levelNumbers(site);
    const top = levels[0];
    const from = site.level;
    let text = `Switch ${name} from level ${from} to level ${to}? `;
    text += to !== top
      ? `Automatic failback will be held until someone switches back to level ${top}.`
      : 'This clears the manual hold: the site\'s configured failback applies again.';
    text += ` Nodes and every publisher get level ${to} at once.`;
    const health = site.levels[String(to)];
    const extra = health !== 'healthy' ? `Warning: level ${to} is ${health} right now; visitors may reach failing origins.` : '';
    showConfirm(`Switch ${name} to level ${to}`, text, extra, `Switch to level ${to}`,
      () => api('POST', `v1/sites/${encodeURIComponent(name)}/switch`, { level: to })
        .then(() => announce(`Switched ${name} to level ${to}.`)), name);
  }

  function confirmOrigin(name, origin, action) {
    const site = findSite(name);
    if (!site) return;
    const o = site.origins[origin];
    let text;
    let extra = '';
    if (action === 'disable') {
      text = `Disable origin ${origin} of ${name}? It stops being probed and leaves level ${o.level}'s health and the publication until someone enables it.`;
      const enabled = originsOf(site).filter((x) => x.state !== 'disabled');
      const inLevel = enabled.filter((x) => x.level === o.level);
      const notes = [];
      if (inLevel.length === 1) notes.push(`Level ${o.level} will have no enabled origin, so it counts as unhealthy.`);
      if (enabled.length - 1 < 2 && site.probing === 'active') {
        notes.push(`${name} will have fewer than two enabled origins, so its health checks pause and it stays on level ${site.level}.`);
      }
      extra = notes.join(' ');
    } else {
      text = `Enable origin ${origin} of ${name}? It starts as unknown and is probed again from the site's next round.`;
    }
    const verb = action === 'disable' ? 'Disable' : 'Enable';
    const path = `v1/sites/${encodeURIComponent(name)}/origins/${encodeURIComponent(origin)}/${action}`;
    showConfirm(`${verb} ${origin}`, text, extra, `${verb} ${origin}`,
      () => api('POST', path, {}).then(() => announce(`${verb}d ${origin} of ${name}.`)), name,
      action === 'disable' ? () => api('POST', path, { force: true }).then(() => announce(`Disabled ${origin} of ${name} (forced).`)) : null);
  }

  document.addEventListener('click', (e) => {
    const x = e.target.closest('button[data-expand]');
    if (x) {
      const name = x.dataset.expand;
      if (st.expanded.has(name)) st.expanded.delete(name); else st.expanded.add(name);
      render(true);
      const s = st.sites.find((v) => v.site === name);
      if (s && expanded(name)) loadHistory([s]).then(() => render(true));
      return;
    }
    const b = e.target.closest('button[data-action]');
    if (!b) return;
    const d = b.dataset;
    if (d.action === 'switch') confirmSwitch(d.site, Number(d.level));
    else confirmOrigin(d.site, d.origin, d.action);
  });

  $('confirm-form').addEventListener('submit', async (e) => {
    e.preventDefault();
    if (!pending) return;
    const ok = $('confirm-ok');
    ok.disabled = true;
    ok.setAttribute('aria-busy', 'true');
    $('confirm-error').hidden = true;
    try {
      await pending.run();
      const site = pending.site;
      pending = null;
      $('confirm').close();
      restoreFocus(site);
      await refresh();
    } catch (err) {
      const box = $('confirm-error');
      box.textContent = `The agent refused: ${err.message}${err.hint ? ` (${err.hint})` : ''}`;
      box.hidden = false;
      ok.disabled = false;
      if (err.status === 401 || err.status === 403) box.append(' ', h('button', { type: 'button', class: 'linkish', onclick: () => { $('confirm').close(); openToken(); } }, 'Change the token'));
      if (err.code === 'last_enabled_origin' && pending && pending.force) {
        // The guard refused: the OK button now forces it, and says so.
        pending.run = pending.force;
        pending.force = null;
        ok.textContent = 'Disable anyway';
        ok.dataset.forced = 'true';
      }
    } finally {
      ok.removeAttribute('aria-busy');
    }
  });
  $('confirm-cancel').addEventListener('click', () => $('confirm').close());
  $('confirm').addEventListener('close', () => {
    if (pending) { const s = pending.site; pending = null; restoreFocus(s); }
  });

  function openToken(why) {
    $('token-why').textContent = why || 'With the agent\'s API token this page offers the operator actions: switch a site\'s level, disable or enable an origin.';
    $('token-input').value = '';
    $('actor-input').value = store.getItem('vigil.actor') || '';
    $('token-error').hidden = true;
    $('token-forget').hidden = !token();
    if (!$('token-dialog').open) openDialog($('token-dialog'), document.activeElement);
    $('token-input').focus();
  }

  $('token-button').addEventListener('click', () => openToken());
  $('token-cancel').addEventListener('click', () => $('token-dialog').close());
  $('token-forget').addEventListener('click', () => {
    store.removeItem('vigil.token');
    $('token-dialog').close();
    tokenState();
    announce('Token forgotten: the page is read only.');
    refresh();
    render(true);
  });
  $('token-form').addEventListener('submit', (e) => {
    e.preventDefault();
    const t = $('token-input').value.trim();
    if (!t) {
      $('token-error').textContent = 'Type the token, or press Cancel.';
      $('token-error').hidden = false;
      return;
    }
    store.setItem('vigil.token', t);
    store.setItem('vigil.actor', $('actor-input').value.trim());
    $('token-dialog').close();
    tokenState();
    announce('Token saved for this tab: operator actions are on.');
    st.askedToken = false;
    wake();
    refresh().then(() => onRoute(false));
  });
  $('token-dialog').addEventListener('close', () => restoreFocus(null));

  // ---- start ----------------------------------------------------------------
  async function onRoute(moveFocus) {
    render(true);
    refresh();
    await loadSiteEvents();
    render(true);
    if (moveFocus) $('page-title').focus();
  }

  // ?site=www is accepted as a link to the site view.
  const qs = new URLSearchParams(window.location.search).get('site');
  if (qs && !route()) window.history.replaceState(null, '', `./#/site/${encodeURIComponent(qs)}`);
  $('page-title').setAttribute('tabindex', '-1');
  let searchTimer = null;
  $('search').addEventListener('input', () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(() => { st.search = $('search').value.trim(); st.limit = SITES_PAGE; refresh(); }, 200);
  });
  window.addEventListener('hashchange', () => onRoute(true));
  document.addEventListener('visibilitychange', () => { if (!document.hidden) refresh(); });
  tokenState();
  refresh().then(() => onRoute(false));
  watch();
  setInterval(() => { if (!document.hidden) refresh(); }, POLL_MS);
  setInterval(tick, 1000);
})();
