// The scheduler (issue 29): each memory budget (the handler's, each device
// set's) and each exclusive group, with what is used of it, the starts that
// wait for room in the order they will be served and why, each engine's
// share, why it is kept and why it last started and stopped, and the swaps
// of the last hour. app.js calls renderMemory with each state.
'use strict';

const fmtBytes = (n) => {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i && n < 10 ? n.toFixed(1) : Math.round(n)) + ' ' + units[i];
};

function renderMemory(boxes) {
  const section = document.querySelector('#memory-section');
  section.hidden = boxes.length === 0;
  keepCards(document.querySelector('#memory'), boxes, 'box', boxCard, updateBox);
}

function boxCard(name) {
  const card = el('article', { class: 'card', 'data-box': name, 'aria-label': name });
  card.append(el('h3', {}, el('span', { text: name }), el('span', { class: 'muted small swaps' })),
    el('div', { class: 'use' }), el('div', { class: 'queue' }), el('div', { class: 'holders' }));
  return card;
}

function updateBox(card, b) {
  const size = (n) => (b.group ? (n === 1 ? 'its turn' : n + ' turns') : fmtBytes(n));
  card.querySelector('.swaps').textContent = b.swaps_last_hour + (b.swaps_last_hour === 1 ? ' swap' : ' swaps') + ' in the last hour' +
    (b.refused ? ' · ' + b.refused + ' refused' : '');
  const use = el('div', { class: 'use' },
    el('meter', { min: '0', max: String(b.budget), value: String(b.used), 'aria-label': b.name + ' used' }),
    el('span', { class: 'small num', 'data-field': 'used', text: (b.group ? (b.used ? 'taken' : 'free') : fmtBytes(b.used) + ' of ' + fmtBytes(b.budget) + ' used') }));
  if (b.asleep && b.asleep.length) {
    // swap sleep: no share of the budget, but their weights stay in host memory
    use.append(el('div', { class: 'small muted', 'data-field': 'asleep', text: 'asleep: ' + b.asleep.join(', ') + ' (' + fmtBytes(b.asleep_memory) + ' in host memory)' }));
  }
  card.querySelector('.use').replaceWith(use);

  const queue = el('div', { class: 'queue' });
  if (b.queue.length) {
    queue.append(el('p', { class: 'small muted', text: 'Waiting for room, in the order they will be served:' }));
    const ol = el('ol', { class: 'members', 'data-field': 'queue' });
    for (const q of b.queue) {
      const li = el('li', { 'data-queued': q.engine },
        el('strong', { text: q.engine }),
        ' (' + size(q.need) + ', ' + q.requests + (q.requests === 1 ? ' request' : ' requests') + (q.priority ? ', priority ' + q.priority : '') + ', waiting ',
        el('span', { class: 'since', 'data-since': String(q.since) }), '): ',
        el('span', { class: 'why', text: q.why }));
      ol.append(li);
    }
    queue.append(ol);
  } else {
    queue.append(el('p', { class: 'small muted', 'data-field': 'queue', text: 'No start waits for room.' }));
  }
  card.querySelector('.queue').replaceWith(queue);

  const holders = el('div', { class: 'holders' });
  const dl = el('dl');
  for (const e of b.engines) {
    const dd = el('dd', { 'data-holder': e.name });
    dd.append(el('span', { class: 'state s-' + e.state, text: e.state }), ' ' + size(e.share));
    if (e.held) {
      dd.append(' · kept: ' + e.held);
      if (e.kept_until) dd.append(' ', el('span', { class: 'countdown', 'data-at': String(e.kept_until) }));
    }
    if (e.started) dd.append(el('div', { class: 'small', 'data-field': 'started', text: 'started' + at(e.started_at) + ': ' + e.started }));
    if (e.stopped) dd.append(el('div', { class: 'small', 'data-field': 'stopped', text: 'stopped' + at(e.stopped_at) + ': ' + e.stopped }));
    dl.append(el('dt', { text: e.name }), dd);
  }
  holders.append(dl);
  card.querySelector('.holders').replaceWith(holders);
  tickMemory();
}

// at is " at 14:02:07" for a time in ms, so a start or stop says when.
function at(ms) {
  return ms ? ' at ' + new Date(ms).toLocaleTimeString([], { hour12: false }) : '';
}

// tickMemory counts the waits up (the kept_until countdowns are app.js's).
function tickMemory() {
  for (const s of document.querySelectorAll('#memory .since')) {
    const secs = Math.max(0, Math.round((Date.now() - Number(s.dataset.since)) / 1000));
    s.textContent = secs + ' s';
  }
}
setInterval(tickMemory, 1000);
