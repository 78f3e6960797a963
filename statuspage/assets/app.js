// The llm_gateway status page: one stream of engine/pool state and recent
// requests, one stream of the chosen engine's output, both server-sent events
// read with fetch (so the key travels in a header, never in a URL).
'use strict';

const KEY_ITEM = 'llm_gateway.key';
const MAX_LOG_LINES = 1000;
let key = sessionStorage.getItem(KEY_ITEM) || '';
let keep = 200;
let engines = [];
let events = null;
let logs = null;
let logEngine = '';

const $ = (sel) => document.querySelector(sel);
const el = (tag, attrs, ...kids) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'class') e.className = v; else if (k === 'text') e.textContent = v; else e.setAttribute(k, v);
  }
  for (const c of kids) e.append(c);
  return e;
};
const authHeaders = () => (key ? { Authorization: 'Bearer ' + key } : {});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- key prompt ----
function showLogin(message) {
  stopStreams();
  $('#main').hidden = true;
  $('#stop-all').hidden = true;
  $('#forget').hidden = true;
  $('#login').hidden = false;
  $('#key-error').textContent = message || '';
  setConn($('#conn'), '', 'key needed');
  $('#key').focus();
}

$('#key-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  key = $('#key').value.trim();
  $('#key').value = '';
  sessionStorage.setItem(KEY_ITEM, key);
  boot();
});

$('#forget').addEventListener('click', () => {
  key = '';
  sessionStorage.removeItem(KEY_ITEM);
  showLogin('');
});

async function boot() {
  let r;
  try {
    r = await fetch('api/state', { headers: authHeaders(), cache: 'no-store' });
  } catch (e) {
    setConn($('#conn'), 'down', 'offline, retrying…');
    await sleep(2000);
    return boot();
  }
  if (r.status === 401) {
    showLogin(key ? 'That key was not accepted.' : '');
    return;
  }
  $('#login').hidden = true;
  $('#main').hidden = false;
  $('#stop-all').hidden = false;
  $('#forget').hidden = !key;
  if (r.ok) renderState(await r.json());
  startEvents();
}

// ---- server-sent events over fetch, with reconnect ----
function openStream(url, onEvent, conn) {
  let stopped = false;
  let ctrl = null;
  let attempt = 0;
  let everLive = false;
  (async () => {
    while (!stopped) {
      ctrl = new AbortController();
      try {
        const r = await fetch(url, { headers: authHeaders(), signal: ctrl.signal, cache: 'no-store' });
        if (r.status === 401) { showLogin('The key is no longer accepted.'); return; }
        if (!r.ok) throw new Error('HTTP ' + r.status);
        setConn(conn, 'live', everLive ? 'live (reconnected)' : 'live');
        everLive = true;
        attempt = 0;
        const reader = r.body.getReader();
        const dec = new TextDecoder();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          let i;
          while ((i = buf.indexOf('\n\n')) >= 0) {
            const block = buf.slice(0, i);
            buf = buf.slice(i + 2);
            let name = 'message';
            let data = '';
            for (const line of block.split('\n')) {
              if (line.startsWith('event: ')) name = line.slice(7);
              else if (line.startsWith('data: ')) data += line.slice(6);
            }
            if (data) onEvent(name, JSON.parse(data));
          }
        }
        throw new Error('the stream ended');
      } catch (e) {
        if (stopped) return;
        attempt++;
        const wait = Math.min(1000 * attempt, 5000);
        setConn(conn, 'retry', 'connection lost, reconnecting (attempt ' + attempt + ')…');
        await sleep(wait);
      }
    }
  })();
  return { stop() { stopped = true; if (ctrl) ctrl.abort(); } };
}

function setConn(node, cls, text) {
  node.className = 'pill ' + cls;
  node.textContent = text;
}

function stopStreams() {
  if (events) events.stop();
  if (logs) logs.stop();
  events = logs = null;
}

function startEvents() {
  if (events) events.stop();
  events = openStream('api/events', (name, data) => {
    if (name === 'state') renderState(data);
    else if (name === 'requests') addRequests(data);
  }, $('#conn'));
}

// ---- engines and pools ----
const fmtMs = (ms) => (ms >= 10000 ? (ms / 1000).toFixed(0) + ' s' : ms >= 1000 ? (ms / 1000).toFixed(1) + ' s' : Math.round(ms) + ' ms');
function countdown(at) {
  const s = Math.max(0, Math.round((at - Date.now()) / 1000));
  if (s >= 86400) return 'in ' + Math.floor(s / 86400) + ' d ' + Math.floor((s % 86400) / 3600) + ' h';
  if (s >= 3600) return 'in ' + Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
  return 'in ' + (s >= 60 ? Math.floor(s / 60) + ' min ' + (s % 60) + ' s' : s + ' s');
}
// fmtCount writes a count as the Caddyfile does: 200000 is 200k.
const fmtCount = (n) => (n >= 1e6 && n % 1e5 === 0 ? n / 1e6 + 'M' : n >= 1e4 && n % 100 === 0 ? n / 1e3 + 'k' : String(n));

function renderState(snap) {
  engines = snap.engines || [];
  keepCards($('#engines'), engines, 'engine', engineCard, updateEngine);
  renderPools(snap.pools || []);
  renderKeys(snap.keys || [], !!snap.issuing);
  if (typeof renderMemory === 'function') renderMemory(snap.memory || []); // memory.js
  renderLogChoice();
  tick();
}

// keepCards keeps one card per item in box, found by the item's name in the
// card's data-<attr>, across updates, so that a focused button keeps its
// focus: a new name gets make(name), every card update(card, item), and a
// card whose name is gone is removed.
function keepCards(box, items, attr, make, update) {
  const seen = new Set();
  for (const it of items) {
    seen.add(it.name);
    let card = box.querySelector('[data-' + attr + '="' + CSS.escape(it.name) + '"]');
    if (!card) card = box.appendChild(make(it.name));
    update(card, it);
  }
  for (const card of [...box.children]) if (!seen.has(card.dataset[attr])) card.remove();
}

function engineCard(name) {
  const card = el('article', { class: 'card', 'data-engine': name, 'aria-label': 'engine ' + name });
  const h = el('h3', {}, el('span', { text: name }), el('span', { class: 'state' }));
  const actions = el('div', { class: 'actions' },
    el('button', { type: 'button', 'data-act': 'start', text: 'Start' }),
    el('button', { type: 'button', 'data-act': 'stop', text: 'Stop' }),
    el('button', { type: 'button', 'data-act': 'drain', text: 'Stop after requests' }),
    el('button', { type: 'button', 'data-act': 'logs', class: 'quiet', text: 'Output' }));
  actions.addEventListener('click', (ev) => {
    const b = ev.target.closest('button');
    if (b) act(name, b.dataset.act);
  });
  card.append(h, el('dl'), actions);
  return card;
}

function updateEngine(card, e) {
  const st = card.querySelector('.state');
  st.textContent = e.state;
  st.className = 'state s-' + e.state;
  const rows = [['models', e.models.join(', ')]];
  // its words for people (display_name, description, metadata), as /v1/models lists them
  const about = e.about || {};
  if (about.display_name) rows.push(['name', about.display_name]);
  if (about.description) rows.push(['description', about.description]);
  const meta = Object.entries(about.metadata || {});
  if (meta.length) rows.push(['metadata', meta.map(([k, v]) => k + ': ' + (typeof v === 'string' ? v : JSON.stringify(v))).join(' · ')]);
  if (e.managed) rows.push(['pid / port', e.pid ? e.pid + ' / ' + (e.port || '–') : '–']);
  if (e.state === 'starting' && e.starting_since) rows.push(['starting', { text: 'for ', since: e.starting_since }]);
  const p = e.provider;
  if (p) {
    // a cloud provider's engine: no process, never probed; its state is its answers
    rows.push(['provider', p.name + (p.where ? ' · ' + p.where : '')]);
    const a = p.last_answer;
    rows.push(['last answer', !a ? 'none yet' : { text: (a.status ? a.status + ' ' : '') + a.reason + ', ', cls: a.failed ? 'error' : '', ago: Date.parse(a.at) }]);
  } else if (!e.managed) rows.push(['remote', e.reachable === undefined ? 'not probed yet' : e.reachable ? 'reachable' : 'not reachable']);
  rows.push(['leases', String(e.leases)]);
  if (e.limit) {
    const l = e.limit;
    rows.push(['concurrency', 'in flight ' + l.in_flight + '/' + l.max_concurrent + ' · ' + (l.queue ? 'queued ' + l.queued + '/' + l.queue : 'no queue')]);
  }
  if (e.sleep_at) rows.push(['sleeps', { text: 'in ', at: e.sleep_at }]); // swap sleep: sleep_after
  if (e.idle_stop_at) rows.push(['idle stop', { at: e.idle_stop_at }]);
  else if (e.managed && e.idle_timeout_s) rows.push(['idle stop', 'after ' + e.idle_timeout_s + ' s idle']);
  if (e.group) rows.push(['group', e.group]);
  if (e.fallback) rows.push(['fallback', e.fallback]);
  rows.push(['breaker', e.breaker_retry_at ? { text: e.breaker + ', trial ', at: e.breaker_retry_at } : e.breaker]);
  for (const [model, state] of Object.entries(e.model_breakers || {})) rows.push(['breaker ' + model, { text: state, cls: 'error' }]);
  if (e.start_ms) rows.push(['start took', fmtMs(e.start_ms)]);
  if (e.last_error) rows.push(['last error', { text: e.last_error, cls: 'error' }]);
  const dl = el('dl');
  for (const [k, v] of rows) {
    const dd = el('dd', { 'data-field': k });
    if (typeof v === 'string') dd.textContent = v;
    else {
      if (v.cls) dd.className = v.cls;
      dd.append(v.text || '');
      if (v.at) dd.append(el('span', { class: 'countdown', 'data-at': String(v.at) }));
      if (v.since) dd.append(el('span', { class: 'elapsed', 'data-since': String(v.since) }));
      if (v.ago) dd.append(el('span', { class: 'elapsed', 'data-since': String(v.ago) }), ' ago');
    }
    dl.append(el('dt', { text: k }), dd);
  }
  card.querySelector('dl').replaceWith(dl);
  const running = e.state === 'ready' || e.state === 'starting';
  const btn = (a) => card.querySelector('[data-act="' + a + '"]');
  btn('start').disabled = !e.managed || running || e.state === 'stopping';
  btn('stop').disabled = !e.managed || !(running || e.state === 'sleeping'); // a sleeping engine's process runs
  btn('drain').disabled = !e.managed || e.state !== 'ready';
  btn('logs').disabled = !e.managed;
  // an engine the gateway does not run (a remote one, a cloud provider's)
  // has no process to start, stop or read
  card.querySelector('.actions').hidden = !e.managed;
}

function renderPools(pools) {
  $('#pools-section').hidden = pools.length === 0;
  const box = $('#pools');
  box.replaceChildren(...pools.map((p) => {
    const ol = el('ol', { class: 'members' });
    for (const m of p.members) {
      ol.append(el('li', m.skipped ? { class: 'skipped' } : {},
        m.member + (m.member.includes('/') ? '' : ' (' + m.model + ')') + ' · engine ',
        el('span', { class: 'state s-' + (m.engine_state || 'stopped'), text: m.engine_state || '?' }),
        ' · breaker ', el('span', { class: 's-' + m.breaker, text: m.breaker })));
    }
    return el('article', { class: 'card', 'data-pool': p.name },
      el('h3', { text: p.name }), el('p', { class: 'muted', text: 'members in the order the next request tries them' }), ol);
  }));
}

// ---- keys with limits ----
// A card per key, kept across updates (as engine cards are) so that the
// Reset button keeps its focus; its limits are redrawn.
function renderKeys(keys, issuing) {
  $('#keys-section').hidden = keys.length === 0 && !issuing;
  $('#issue-form').hidden = !issuing;
  keepCards($('#keys'), keys, 'key', keyCard, (card, k) => {
    card.querySelector('.limits').replaceWith(el('div', { class: 'limits' }, ...k.limits.map(limitRow)));
    if (typeof updateIssued === 'function') updateIssued(card, k); // keys.js
  });
}

function keyCard(name) {
  const reset = el('button', { type: 'button', 'data-act': 'reset', text: 'Reset' });
  reset.addEventListener('click', () => resetKey(name));
  return el('article', { class: 'card', 'data-key': name, 'aria-label': 'key ' + name },
    el('h3', { text: name }), el('dl', { class: 'issued' }), el('div', { class: 'limits' }), el('div', { class: 'actions' }, reset));
}

// limitRow is one limit: a bar of what was used of it, what is left, and
// when its window resets.
function limitRow(l) {
  const label = l.kind + ' ' + l.limit;
  // a money budget counts nano-dollars
  const fmt = l.kind === 'spend' ? (n) => '$' + (n / 1e9).toFixed(2) : fmtCount;
  const used = fmt(l.used) + ' of ' + fmt(l.max) + (l.reserved ? ' (+' + fmt(l.reserved) + ' in flight)' : '');
  return el('div', { class: 'limit', 'data-limit': l.kind + ' ' + l.limit },
    el('div', { class: 'row spread' }, el('span', { text: label }), el('span', { class: 'used num', text: used })),
    el('meter', { min: '0', max: String(l.max), value: String(Math.min(l.used, l.max)), low: String(l.max * 0.7), high: String(l.max * 0.9), optimum: '0', 'aria-label': label + ': ' + used }),
    el('div', { class: 'muted small' }, el('span', { class: 'remaining', text: fmt(l.remaining) + ' left' }),
      ' · resets ', el('span', { class: 'countdown', 'data-at': String(l.reset_at) })));
}

async function resetKey(name) {
  if (!(await confirmAction('Reset the counters of key ' + name + '? Its requests and tokens count from zero again in every window.'))) return;
  await post('api/keys/' + encodeURIComponent(name) + '/reset', 'Resetting ' + name + '…', name + ': counters reset');
}

function tick() {
  for (const n of document.querySelectorAll('.countdown')) n.textContent = countdown(Number(n.dataset.at));
  for (const n of document.querySelectorAll('.elapsed')) n.textContent = Math.max(0, Math.round((Date.now() - Number(n.dataset.since)) / 1000)) + ' s';
}
setInterval(tick, 1000);

// ---- actions ----
const dialog = $('#confirm');
function confirmAction(text) {
  return new Promise((resolve) => {
    $('#confirm-text').textContent = text;
    dialog.returnValue = '';
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
    dialog.showModal();
  });
}

async function act(name, what) {
  if (what === 'logs') { logPicked = true; chooseLog(name); $('#log').focus(); return; }
  const questions = {
    start: 'Start engine ' + name + '?',
    stop: 'Stop engine ' + name + ' now? Requests in flight are cut.',
    drain: 'Stop engine ' + name + ' once its requests in flight have finished?',
  };
  if (!(await confirmAction(questions[what]))) return;
  const path = 'api/engines/' + encodeURIComponent(name) + '/' + (what === 'start' ? 'start' : 'stop') + (what === 'drain' ? '?drain=true' : '');
  await post(path, what === 'start' ? 'Starting ' + name + '…' : 'Stopping ' + name + '…', name + ': done');
}

$('#stop-all').addEventListener('click', async () => {
  if (!(await confirmAction('Stop every running engine now? Requests in flight are cut.'))) return;
  await post('api/stop-all', 'Stopping every engine…', 'Every engine is stopped');
});

async function post(path, pending, done) {
  const notice = $('#notice');
  notice.textContent = pending;
  try {
    const r = await fetch(path, { method: 'POST', headers: authHeaders() });
    if (r.status === 401) { showLogin('The key is no longer accepted.'); return; }
    const body = await r.json().catch(() => ({}));
    notice.textContent = r.ok ? done : 'Failed: ' + ((body.error && body.error.message) || JSON.stringify(body.failed || body));
  } catch (e) {
    notice.textContent = 'Failed: ' + e.message;
  }
}

// ---- live engine output ----
function renderLogChoice() {
  const sel = $('#log-engine');
  const names = engines.filter((e) => e.managed).map((e) => e.name);
  if ([...sel.options].map((o) => o.value).join('\n') !== names.join('\n')) {
    sel.replaceChildren(...names.map((n) => el('option', { value: n, text: n })));
  }
  // open on a running engine, whose output is the one worth reading, and
  // follow one that starts (beside it, or in its place) until the operator
  // picks an engine
  const isRunning = (e) => e.managed && (e.state === 'ready' || e.state === 'starting');
  const running = engines.find(isRunning);
  const starting = engines.find((e) => e.managed && e.state === 'starting');
  const shown = engines.find((e) => e.name === logEngine);
  if (!names.includes(logEngine)) chooseLog(running ? running.name : names[0] || '');
  else if (!logPicked && starting && starting !== shown) chooseLog(starting.name);
  else if (!logPicked && running && !isRunning(shown)) chooseLog(running.name);
  else sel.value = logEngine;
}

let logPicked = false; // the operator chose the engine whose output is shown
$('#log-engine').addEventListener('change', (ev) => { logPicked = true; chooseLog(ev.target.value); });

function chooseLog(name) {
  if (name === logEngine && logs) return;
  logEngine = name;
  $('#log-engine').value = name;
  if (logs) logs.stop();
  logs = null;
  $('#log').textContent = '';
  if (!name) { setConn($('#log-conn'), '', 'no engine'); return; }
  logs = openStream('api/logs/' + encodeURIComponent(name), (ev, data) => {
    if (ev === 'lines') addLines(data);
  }, $('#log-conn'));
}

// addLines stamps each line with its time and draws a line where a new
// run (the engine's next start) begins.
let lastRun = -1;
function addLines(data) {
  const pre = $('#log');
  const follow = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
  if (data.reset) { pre.textContent = ''; lastRun = -1; }
  let text = '';
  data.lines.forEach((line, i) => {
    const run = data.run ? data.run[i] : 0;
    const at = data.at ? new Date(data.at[i]) : null;
    if (lastRun >= 0 && run !== lastRun) text += '──── start ' + run + (at ? ' at ' + at.toLocaleTimeString() : '') + ' ────\n';
    lastRun = run;
    text += (at ? at.toLocaleTimeString([], { hour12: false }) + '  ' : '') + line + '\n';
  });
  if (text) pre.append(text);
  text = pre.textContent;
  const over = text.split('\n').length - MAX_LOG_LINES;
  if (over > 0) {
    let cut = 0;
    for (let i = 0; i < over; i++) cut = text.indexOf('\n', cut) + 1;
    pre.textContent = text.slice(cut);
  }
  if (follow) pre.scrollTop = pre.scrollHeight;
}

// ---- recent requests ----

// The APIs a request speaks: the client's, and the engine's when the
// gateway translated (issue 53). The filters of both tables offer them.
const API_CHOICES = [['', 'any'], ['chat', 'Chat Completions'], ['messages', 'Messages'], ['responses', 'Responses'],
  ['completions', 'Completions'], ['embeddings', 'Embeddings'], ['translated', 'translated']];
for (const sel of document.querySelectorAll('select.api-filter')) {
  sel.replaceChildren(...API_CHOICES.map(([v, label]) => el('option', { value: v, text: label })));
}

const isTranslated = (q) => !!q.engine_api && q.engine_api !== q.api;

// apiCell shows the client's API, and "→ the engine's (translated)" when
// the engine was spoken to in another.
function apiCell(q) {
  const td = el('td', { class: 'api' }, q.api || '–');
  if (isTranslated(q)) td.append(' → ' + q.engine_api + ' ', el('span', { class: 'translated', text: 'translated' }));
  return td;
}

// apiMatches is the history's api= filter (history.Filter) for the
// recent list, which the page filters itself.
function apiMatches(q, want) {
  if (!want) return true;
  if (want === 'translated') return isTranslated(q);
  return q.api === want || (isTranslated(q) && q.engine_api === want);
}

function filterRequests() {
  const want = $('#req-api').value;
  const rows = [...$('#requests tbody').rows];
  for (const r of rows) r.hidden = !apiMatches({ api: r.dataset.api, engine_api: r.dataset.engineApi }, want);
  const shown = rows.filter((r) => !r.hidden).length;
  $('#req-count').textContent = '(' + (want ? shown + ' shown, ' : '') + rows.length + ' of the last ' + keep + ')';
}
$('#req-api').addEventListener('change', filterRequests);

function addRequests(data) {
  const tbody = $('#requests tbody');
  keep = data.keep || keep;
  if (data.reset) tbody.replaceChildren();
  // in start order, newest first: a long stream that ends late goes below
  // the requests that started after it
  for (const q of data.requests) {
    const row = requestRow(q, !data.reset);
    const after = [...tbody.rows].find((r) => Number(r.dataset.time) <= q.time);
    tbody.insertBefore(row, after || null);
  }
  while (tbody.rows.length > keep) tbody.deleteRow(-1);
  filterRequests();
}

function requestRow(q, fresh) {
  const t = new Date(q.time);
  const cls = (q.status >= 400 ? 'bad' : '') + (fresh ? ' fresh' : '');
  const tokens = q.tokens_in < 0 ? '–' : q.tokens_in + ' / ' + q.tokens_out;
  let via = q.fallback ? 'fallback ' + q.fallback : '';
  if (q.attempts > 1) via += (via ? ', ' : '') + q.attempts + ' attempts';
  const td = (cls, text) => el('td', { class: cls, text });
  const status = td('status num', String(q.status));
  if (q.reason && q.reason !== String(q.status)) status.append(' ', el('span', { class: 'reason', text: q.reason }));
  return el('tr', { class: cls.trim(), 'data-seq': String(q.seq), 'data-time': String(q.time), 'data-api': q.api || '', 'data-engine-api': q.engine_api || '' },
    el('td', {}, el('time', { datetime: t.toISOString(), text: t.toLocaleTimeString() })),
    td('model', q.model), td('engine', q.engine || '–'), apiCell(q), td('via', via), status,
    td('num', q.ttfb_ms ? fmtMs(q.ttfb_ms) : '–'), td('num', fmtMs(q.duration_ms)), td('tokens num', tokens), td('key', q.key || ''),
    td('path', q.path || ''), td('agent', q.user_agent || ''));
}

boot();
