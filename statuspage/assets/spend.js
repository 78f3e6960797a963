// The status page's spend charts (issue 54): what each key and each model
// cost per UTC day over the last 7 or 30 days, from the page's own API
// (api/spend, summed as GET /llm_gateway/spend sums), drawn here as inline
// SVG bars. It uses app.js's helpers ($, el, authHeaders, showLogin) and
// history.js's svgEl.
'use strict';

const spend = { days: '7' };

// fmtUsd writes dollars to the cent, and a spend below a cent to a
// hundredth of one, so that it never reads as nothing.
const fmtUsd = (v) => '$' + (v === 0 || v >= 0.01 ? v.toFixed(2) : v.toFixed(4));
const fmtDay = (d) => new Date(d + 'T00:00:00Z').toLocaleDateString([], { month: 'short', day: 'numeric', timeZone: 'UTC' });

async function loadSpend() {
  const r = await fetch('api/spend?days=' + spend.days, { headers: authHeaders(), cache: 'no-store' });
  if (r.status === 401) { showLogin('The key is no longer accepted.'); return; }
  if (r.status === 404) { $('#spend-section').hidden = true; return; }
  if (!r.ok) throw new Error('HTTP ' + r.status);
  $('#spend-section').hidden = false;
  renderSpend(await r.json());
}

function renderSpend(c) {
  const box = $('#spend');
  box.dataset.days = String(c.days.length);
  $('#spend-total').textContent = fmtUsd(c.cost_usd) + ' from ' + fmtDay(c.days[0]) + ' to ' + fmtDay(c.days[c.days.length - 1]) + ' (UTC days)' +
    (c.partial ? '; the history holds only from ' + new Date(c.from).toLocaleString() : '');
  box.replaceChildren(spendTable('Per key', 'keys', 'Key', c.keys, c.days), spendTable('Per model', 'models', 'Model', c.models, c.days));
}

// spendTable is a row per key or model: its total, its requests, and a bar
// per day on one scale for the whole table.
function spendTable(title, name, col, rows, days) {
  const top = Math.max(1e-9, ...rows.flatMap((r) => r.days));
  const n = days.length;
  const body = el('tbody');
  for (const r of rows) {
    const bars = svgEl('svg', { viewBox: '0 0 ' + n * 10 + ' 24', preserveAspectRatio: 'none', role: 'img',
      'aria-label': (r.name || '(no key)') + ': ' + r.days.map((v, i) => fmtDay(days[i]) + ' ' + fmtUsd(v)).join(', ') },
    svgEl('line', { class: 'axis', x1: 0, y1: 23.5, x2: n * 10, y2: 23.5 }));
    r.days.forEach((v, i) => {
      if (!v) return;
      const h = Math.max(1, (v / top) * 22);
      bars.append(svgEl('rect', { class: 'bar c-spend', x: i * 10 + 1, y: 23 - h, width: 8, height: h, 'data-day': days[i], 'data-usd': String(v) },
        svgEl('title', { text: fmtDay(days[i]) + ': ' + fmtUsd(v) })));
    });
    body.append(el('tr', { 'data-name': r.name },
      el('td', { class: r.name ? '' : 'muted', text: r.name || '(no key)' }), el('td', { class: 'num cost', text: fmtUsd(r.cost_usd) }),
      el('td', { class: 'num', text: String(r.requests) }), el('td', { class: 'bar' }, bars)));
  }
  const axis = el('span', { class: 'days' }, el('span', { text: fmtDay(days[0]) }), el('span', { text: 'today' }));
  const head = el('thead', {}, el('tr', {}, ...[col, 'Spent', 'Requests'].map((h) => el('th', { scope: 'col', text: h })), el('th', { scope: 'col', class: 'bar' }, axis)));
  return el('figure', { 'data-chart': name, class: 'spend-chart' }, el('figcaption', {}, title),
    rows.length ? el('table', {}, head, body) : el('p', { class: 'muted', text: 'no requests in these days' }));
}

for (const b of document.querySelectorAll('button.spend-range')) {
  b.addEventListener('click', () => {
    spend.days = b.dataset.days;
    for (const o of document.querySelectorAll('button.spend-range')) o.setAttribute('aria-pressed', String(o === b));
    loadSpend().catch(spendFailed);
  });
}

function spendFailed(e) {
  $('#spend-total').textContent = 'The spend could not be read: ' + e.message;
}

function spendRefresh() {
  if (!$('#main').hidden) loadSpend().catch(spendFailed);
}
new MutationObserver(spendRefresh).observe($('#main'), { attributes: true, attributeFilter: ['hidden'] });
setInterval(spendRefresh, 30000);
