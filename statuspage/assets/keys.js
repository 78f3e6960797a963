// Keys issued at run time, for operators: the form that issues one, each
// issued key's life on its card (note, models, expiry, last use, requests,
// tokens used), and its Edit, Rotate and Revoke buttons. A token reaches
// the page once, in the answer to its issue or rotation: it is shown in a
// dialog and cleared from it when the dialog closes. app.js calls
// updateIssued for each key's card.
'use strict';

const words = (v) => v.split(/[\s,]+/).filter(Boolean);

// keyCall sends a call of the page's key API and answers its JSON, or null
// when it failed (the notice says why).
async function keyCall(method, path, body, pending, done) {
  const notice = $('#notice');
  notice.textContent = pending;
  try {
    const r = await fetch(path, {
      method, cache: 'no-store',
      headers: Object.assign({ 'Content-Type': 'application/json' }, authHeaders()),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (r.status === 401) { showLogin('The key is no longer accepted.'); return null; }
    const answer = await r.json().catch(() => ({}));
    if (!r.ok) {
      notice.textContent = 'Failed: ' + ((answer.error && answer.error.message) || r.status);
      return null;
    }
    notice.textContent = done;
    return answer;
  } catch (e) {
    notice.textContent = 'Failed: ' + e.message;
    return null;
  }
}

// showToken shows a token this once.
function showToken(title, token) {
  const d = $('#token-dialog');
  $('#token-h').textContent = title;
  $('#token').value = token;
  d.addEventListener('close', () => { $('#token').value = ''; }, { once: true });
  d.showModal();
  $('#token').select();
}

$('#token-copy').addEventListener('click', async () => {
  const t = $('#token');
  try {
    await navigator.clipboard.writeText(t.value);
    $('#token-copy').textContent = 'Copied';
  } catch (e) {
    t.select(); // the clipboard needs a secure context: select it for a copy by hand
  }
});

$('#issue-form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const f = ev.target.elements;
  const body = { name: f.name.value.trim() };
  if (f.models.value.trim()) body.models = words(f.models.value);
  if (f.rate.value.trim()) body.rate = words(f.rate.value);
  if (f.tokens.value.trim()) body.tokens = words(f.tokens.value);
  if (f.expires_in.value.trim()) body.expires_in = f.expires_in.value.trim();
  if (f.note.value.trim()) body.note = f.note.value.trim();
  const k = await keyCall('POST', 'api/keys', body, 'Issuing ' + body.name + '…', body.name + ': issued');
  if (!k) return;
  ev.target.reset();
  showToken('The token of ' + k.name, k.token);
});

// updateIssued draws an issued key's life on its card, and gives it its
// buttons once.
function updateIssued(card, k) {
  const v = k.issued;
  const dl = el('dl', { class: 'issued' });
  if (v) {
    const when = (ms) => new Date(ms).toLocaleString();
    const rows = [];
    if (v.note) rows.push(['note', v.note]);
    rows.push(['models', (v.models || []).join(', ') || 'all']);
    if (v.expires) rows.push(['expires', { text: when(v.expires) + ', ', at: v.expires }]);
    rows.push(['created', when(v.created)]);
    if (v.rotated) rows.push(['rotated', when(v.rotated)]);
    if (v.old_token_until) rows.push(['old token', { text: 'accepted until ' + when(v.old_token_until) + ', ', at: v.old_token_until }]);
    rows.push(['last used', v.last_used ? when(v.last_used) : 'never']);
    rows.push(['requests', String(v.requests)], ['tokens used', fmtCount(v.tokens_used)]);
    for (const [name, val] of rows) {
      const dd = el('dd', { 'data-field': name });
      if (typeof val === 'string') dd.textContent = val;
      else dd.append(val.text, el('span', { class: 'countdown', 'data-at': String(val.at) }));
      dl.append(el('dt', { text: name }), dd);
    }
  }
  card.querySelector('dl.issued').replaceWith(dl);
  card.querySelector('h3').textContent = k.name + (k.source === 'identity' ? ' (signed in)' : '');
  const actions = card.querySelector('.actions');
  if (v && !actions.querySelector('[data-act="revoke"]')) {
    const button = (act, text, run, cls) => {
      const b = el('button', { type: 'button', 'data-act': act, text, class: cls || '' });
      b.addEventListener('click', () => run(k.name));
      return b;
    };
    actions.append(button('edit', 'Edit', editKey), button('rotate', 'Rotate', rotateKey), button('revoke', 'Revoke', revokeKey, 'danger'));
  }
  card.dataset.issued = v ? 'yes' : '';
  actions.querySelector('[data-act="reset"]').hidden = k.limits.length === 0;
  if (v) card.dataset.rules = JSON.stringify({ models: v.models || [], rate: v.rate || [], tokens: v.tokens || [], note: v.note || '' });
}

function editKey(name) {
  const card = $('#keys').querySelector('[data-key="' + CSS.escape(name) + '"]');
  const r = JSON.parse(card.dataset.rules || '{}');
  const f = $('#edit-form').elements;
  $('#edit-h').textContent = 'Rules of ' + name;
  f.models.value = (r.models || []).join(' ');
  f.rate.value = (r.rate || []).join(' ');
  f.tokens.value = (r.tokens || []).join(' ');
  f.note.value = r.note || '';
  f.expires_in.value = '';
  const d = $('#edit-dialog');
  d.returnValue = '';
  d.addEventListener('close', async () => {
    if (d.returnValue !== 'ok') return;
    const body = {
      models: f.models.value.trim() ? words(f.models.value) : null,
      rate: words(f.rate.value), tokens: words(f.tokens.value), note: f.note.value.trim(),
    };
    if (f.expires_in.value.trim()) body.expires_in = f.expires_in.value.trim();
    await keyCall('PATCH', 'api/keys/' + encodeURIComponent(name), body, 'Saving ' + name + '…', name + ': saved');
  }, { once: true });
  d.showModal();
}

function rotateKey(name) {
  const d = $('#rotate-dialog');
  $('#rotate-text').textContent = 'Give key ' + name + ' a new token?';
  $('#rotate-overlap').value = '';
  d.returnValue = '';
  d.addEventListener('close', async () => {
    if (d.returnValue !== 'ok') return;
    const overlap = $('#rotate-overlap').value;
    const k = await keyCall('POST', 'api/keys/' + encodeURIComponent(name) + '/rotate', overlap ? { overlap } : {}, 'Rotating ' + name + '…', name + ': rotated');
    if (k) showToken('The new token of ' + name, k.token);
  }, { once: true });
  d.showModal();
}

async function revokeKey(name) {
  if (!(await confirmAction('Revoke key ' + name + '? Every token of it is refused at once, on every front door within a second.'))) return;
  await keyCall('DELETE', 'api/keys/' + encodeURIComponent(name), undefined, 'Revoking ' + name + '…', name + ': revoked');
}
