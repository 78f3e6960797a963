// The status page's request history and its charts (issue 27): read from
// the page's own API (api/history, api/charts) with the page's key, drawn
// here as inline SVG. Nothing is loaded from elsewhere. It uses app.js's
// helpers ($, el, authHeaders, fmtMs, showLogin, apiCell).
'use strict';

const hist = { range: '1h', filter: {}, next: 0, timer: null, off: false };
const SVG = 'http://www.w3.org/2000/svg';
const CHART_W = 600;
const CHART_H = 150;
const PAD = { l: 44, r: 8, t: 10, b: 20 };

const svgEl = (tag, attrs, ...kids) => {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === 'text') e.textContent = v; else e.setAttribute(k, v);
  }
  for (const c of kids) e.append(c);
  return e;
};

async function histGet(path) {
  const r = await fetch(path, { headers: authHeaders(), cache: 'no-store' });
  if (r.status === 401) { showLogin('The key is no longer accepted.'); return null; }
  if (r.status === 404) { hist.off = true; $('#history-section').hidden = true; return null; }
  if (!r.ok) throw new Error('HTTP ' + r.status);
  hist.off = false;
  $('#history-section').hidden = false;
  return r;
}

function histQuery(extra) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries({ ...hist.filter, ...extra })) if (v) q.set(k, v);
  return q.toString();
}

// ---- charts ----
async function loadCharts() {
  const r = await histGet('api/charts?range=' + hist.range);
  if (r) renderCharts(await r.json());
}

function renderCharts(c) {
  const box = $('#charts');
  box.dataset.range = c.range;
  box.replaceChildren(
    chart('Requests by status', 'requests', [['ok', '1xx–3xx'], ['client', '4xx'], ['server', '5xx']], statusBars(c)),
    chart('Time to first byte', 'ttfb', [['p50', 'p50'], ['p95', 'p95']],
      lines(c, [['p50', c.buckets.map((b) => b.ttfb_p50)], ['p95', c.buckets.map((b) => b.ttfb_p95)]], fmtMs)),
    chart('Tokens per second', 'speed', [['speed', 'completion tokens / s']],
      lines(c, [['speed', c.buckets.map((b) => b.tokens_per_s)]], (v) => v.toFixed(v < 10 ? 1 : 0))),
    engineTable(c.engines));
}

function chart(title, name, legend, body) {
  const cap = el('figcaption', {}, title);
  for (const [cls, label] of legend) cap.append(el('span', { class: 'legend' }, el('i', { class: 'c-' + cls }), label));
  return el('figure', { 'data-chart': name }, cap, body);
}

// frame is an SVG with its axes, the time of the first bucket, the middle
// and now, and the top value's label.
function frame(c, top, fmt, label) {
  const s = svgEl('svg', { viewBox: '0 0 ' + CHART_W + ' ' + CHART_H, role: 'img', 'aria-label': label });
  const bottom = CHART_H - PAD.b;
  s.append(svgEl('line', { class: 'axis', x1: PAD.l, y1: bottom, x2: CHART_W - PAD.r, y2: bottom }),
    svgEl('line', { class: 'axis', x1: PAD.l, y1: PAD.t, x2: PAD.l, y2: bottom }),
    svgEl('text', { x: PAD.l - 4, y: PAD.t + 8, 'text-anchor': 'end', text: fmt(top) }),
    svgEl('text', { x: PAD.l - 4, y: bottom, 'text-anchor': 'end', text: '0' }));
  const n = c.buckets.length;
  const at = (i) => new Date(c.from + i * c.step_ms).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  for (const [i, anchor] of [[0, 'start'], [n / 2, 'middle'], [n, 'end']]) {
    s.append(svgEl('text', { x: xAt(c, i), y: CHART_H - 5, 'text-anchor': anchor, text: i === n ? 'now' : at(i) }));
  }
  return s;
}

const xAt = (c, i) => PAD.l + (i * (CHART_W - PAD.l - PAD.r)) / c.buckets.length;
const yAt = (v, top) => CHART_H - PAD.b - (v / top) * (CHART_H - PAD.t - PAD.b);

function statusBars(c) {
  const top = Math.max(1, ...c.buckets.map((b) => b.ok + b.client + b.server));
  const total = c.buckets.reduce((n, b) => n + b.ok + b.client + b.server, 0);
  const s = frame(c, top, String, total + ' requests in the last ' + (c.range === '1h' ? 'hour' : 'day'));
  const w = Math.max(1, (CHART_W - PAD.l - PAD.r) / c.buckets.length - 1);
  c.buckets.forEach((b, i) => {
    let base = 0;
    for (const kind of ['ok', 'client', 'server']) {
      if (!b[kind]) continue;
      const y0 = yAt(base, top);
      const y1 = yAt(base + b[kind], top);
      s.append(svgEl('rect', { class: 'bar c-' + kind, x: xAt(c, i), y: y1, width: w, height: Math.max(1, y0 - y1) },
        svgEl('title', { text: b[kind] + ' × ' + kind })));
      base += b[kind];
    }
  });
  return s;
}

// lines draws series of values per bucket; 0 is "no request" and breaks the line.
function lines(c, series, fmt) {
  const top = Math.max(1e-9, ...series.flatMap(([, vs]) => vs));
  const s = frame(c, top, fmt, series.map(([name, vs]) => name + ' up to ' + fmt(Math.max(0, ...vs))).join(', '));
  const half = (CHART_W - PAD.l - PAD.r) / c.buckets.length / 2;
  for (const [name, vs] of series) {
    let d = '';
    let open = false;
    vs.forEach((v, i) => {
      if (!v) { open = false; return; }
      const x = (xAt(c, i) + half).toFixed(1);
      const y = yAt(v, top).toFixed(1);
      d += (open ? 'L' : 'M') + x + ' ' + y;
      open = true;
      s.append(svgEl('circle', { class: 'dot c-' + name, cx: x, cy: y, r: 2 }, svgEl('title', { text: name + ' ' + fmt(v) })));
    });
    if (d) s.append(svgEl('path', { class: 'line c-' + name, d }));
  }
  return s;
}

function engineTable(engines) {
  const top = Math.max(1, ...engines.map((e) => e.requests));
  const body = el('tbody');
  for (const e of engines) {
    const bar = svgEl('svg', { viewBox: '0 0 100 10', preserveAspectRatio: 'none', 'aria-hidden': 'true' },
      svgEl('rect', { class: 'c-ok', x: 0, y: 0, height: 10, width: (100 * (e.requests - e.errors)) / top }),
      svgEl('rect', { class: 'c-server', x: (100 * (e.requests - e.errors)) / top, y: 0, height: 10, width: (100 * e.errors) / top }));
    body.append(el('tr', { 'data-engine': e.name },
      el('td', { text: e.name }), el('td', { class: 'num', text: String(e.requests) }), el('td', { class: 'num', text: String(e.errors) }),
      el('td', { class: 'num', text: e.ttfb_p50 ? fmtMs(e.ttfb_p50) + ' / ' + fmtMs(e.ttfb_p95) : '–' }),
      el('td', { class: 'num', text: e.tokens_per_s ? e.tokens_per_s.toFixed(1) : '–' }), el('td', { class: 'bar' }, bar)));
  }
  const head = el('thead', {}, el('tr', {}, ...['Engine', 'Requests', 'Failed', 'TTFB p50 / p95', 'Tokens / s', ''].map((h) => el('th', { scope: 'col', text: h }))));
  return el('figure', { 'data-chart': 'engines', class: 'engines-chart' }, el('figcaption', {}, 'Per engine'),
    engines.length ? el('table', {}, head, body) : el('p', { class: 'muted', text: 'no requests in this range' }));
}

for (const b of document.querySelectorAll('button.range')) {
  b.addEventListener('click', () => {
    hist.range = b.dataset.range;
    for (const o of document.querySelectorAll('button.range')) o.setAttribute('aria-pressed', String(o === b));
    loadCharts().catch(histFailed);
  });
}

// ---- the history table ----
async function loadHistory(older) {
  const r = await histGet('api/history?' + histQuery(older ? { before: hist.next } : {}));
  if (!r) return;
  const page = await r.json();
  const tbody = $('#history tbody');
  if (!older) tbody.replaceChildren();
  for (const q of page.requests) tbody.append(historyRow(q));
  hist.next = page.next || 0;
  $('#hist-older').hidden = !hist.next;
  const age = page.max_age_s % 86400 === 0 ? page.max_age_s / 86400 + ' days' : page.max_age_s % 3600 === 0 ? page.max_age_s / 3600 + ' h' : page.max_age;
  $('#hist-kept').textContent = '(kept: the last ' + fmtCount(page.keep) + ' requests of at most ' + age + ', ' + (page.stored === 'file' ? 'on disk' : 'in memory') + ')';
  $('#hist-note').textContent = tbody.rows.length ? '' : 'No request matches.';
  const models = $('#hist-models');
  const known = new Set([...models.options].map((o) => o.value));
  for (const q of page.requests) if (!known.has(q.model)) { known.add(q.model); models.append(el('option', { value: q.model })); }
}

function historyRow(q) {
  const t = new Date(q.time);
  const td = (cls, text) => el('td', { class: cls, text });
  // a hedge's attempt says so, and one that lost how long it ran after the win
  const tries = (q.tries || []).map((a) => a.engine + ' ' + a.reason + (a.hedge ? ' (hedge)' : '') +
    (a.waited_ms >= 1 ? ' (waited ' + fmtMs(a.waited_ms) + ')' : '') +
    (a.reason === 'lost' ? ' (ran ' + fmtMs(a.lost_for_ms || 0) + ' after the win)' : '')).join(' → ');
  const status = el('td', { class: 'status num' }, String(q.status));
  if (q.reason && q.reason !== String(q.status)) status.append(' ', el('span', { class: 'reason', text: q.reason }));
  // a cut answer: how much of it the client had been sent
  if (q.cut) status.append(' ', el('span', { class: 'reason', text: 'after ' + fmtBytes(q.relayed_bytes || 0) }));
  return el('tr', { class: q.status >= 400 ? 'bad' : '', 'data-seq': String(q.seq) },
    el('td', {}, el('time', { datetime: t.toISOString(), text: t.toLocaleString() })),
    td('model', q.model), td('engine', q.engine || '–'), apiCell(q), status, td('tries', tries || '–'),
    td('num', q.ttfb_ms ? fmtMs(q.ttfb_ms) : '–'), td('num', fmtMs(q.duration_ms)),
    td('tokens num', q.tokens_in < 0 ? '–' : q.tokens_in + ' / ' + q.tokens_out),
    td('key', q.key || ''), td('path', q.path || ''), td('client', q.client || ''), td('agent', q.user_agent || ''), td('session', q.session || ''));
}

$('#hist-filter').addEventListener('submit', (ev) => {
  ev.preventDefault();
  hist.filter = { model: $('#hist-model').value.trim(), key: $('#hist-key').value.trim(), status: $('#hist-status').value,
    api: $('#hist-api').value, config: $('#hist-current').checked ? 'current' : '' };
  loadHistory(false).catch(histFailed);
});

$('#hist-older').addEventListener('click', () => loadHistory(true).catch(histFailed));

// the export is fetched with the key (never in a URL) and saved from memory
$('#hist-export').addEventListener('click', async () => {
  try {
    const r = await histGet('api/history?' + histQuery({ format: 'jsonl' }));
    if (!r) return;
    const url = URL.createObjectURL(await r.blob());
    const a = el('a', { href: url, download: 'llm_gateway-requests.jsonl' });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (e) { histFailed(e); }
});

function histFailed(e) {
  $('#hist-note').textContent = 'The history could not be read: ' + e.message;
}

// refresh while the page is shown: the charts, and the first page unless
// the operator is paging back
function histRefresh() {
  if ($('#main').hidden) return;
  loadCharts().catch(histFailed);
  if (!hist.next || $('#history tbody').rows.length <= 100) loadHistory(false).catch(histFailed);
}
new MutationObserver(histRefresh).observe($('#main'), { attributes: true, attributeFilter: ['hidden'] });
setInterval(histRefresh, 10000);
