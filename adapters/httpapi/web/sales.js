// The live sale page: polls GET /admin/sales.json once a second with the
// admin's token and draws each sale. No build step, no framework: the DOM
// and uPlot (vendored beside this file). Server strings go in through
// textContent only, never as HTML.
(function () {
  'use strict';

  // hmdp's front end keeps the login token under this sessionStorage key, so
  // an admin logged in there is logged in here too; it dies with the tab.
  var TOKEN_KEY = 'token';
  var POLL_MS = 1000;
  var TIMEOUT_MS = 2000;
  var WINDOW = 60; // seconds of claims/s kept in each chart
  // One reading can catch a claim between its steps and look unbalanced:
  // the page flags an imbalance only when this many readings in a row show it.
  var IMBALANCED_AFTER = 3;
  var OUTCOMES = ['success', 'sold_out', 'duplicate', 'not_started', 'ended', 'not_found', 'busy', 'error'];
  var COLORS = {
    success: '#16a34a', sold_out: '#f59e0b', duplicate: '#8b5cf6', not_started: '#64748b',
    ended: '#94a3b8', not_found: '#0ea5e9', busy: '#ef4444', error: '#7f1d1d'
  };

  var $ = function (id) { return document.getElementById(id); };
  var cards = new Map(); // voucher id -> card state
  var timer = null;
  var generation = 0; // a poll of an older session must not schedule another
  // The first poll, and the one after a sale's card appears, asks for the
  // last minute of claims so the chart starts with it instead of empty.
  var wantHistory = true;

  function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }

  function setStatus(text, cls) {
    var s = $('status');
    s.textContent = text;
    s.className = 'status ' + (cls || '');
  }

  function stop() {
    generation++;
    if (timer) { clearTimeout(timer); timer = null; }
  }

  function showLogin(msg) {
    stop();
    $('board').hidden = true;
    $('login').hidden = false;
    $('login-error').textContent = msg || '';
    setStatus('not connected', 'down');
    $('token').focus();
  }

  function start() {
    stop();
    $('login').hidden = true;
    $('board').hidden = false;
    setStatus('connecting…', '');
    wantHistory = true;
    poll(generation);
  }

  $('login').addEventListener('submit', function (e) {
    e.preventDefault();
    var t = $('token').value.trim();
    if (!t) { return; }
    sessionStorage.setItem(TOKEN_KEY, t);
    $('token').value = '';
    start();
  });

  $('logout').addEventListener('click', function () {
    sessionStorage.removeItem(TOKEN_KEY);
    showLogin('');
  });

  function poll(gen) {
    var ctl = new AbortController();
    var to = setTimeout(function () { ctl.abort(); }, TIMEOUT_MS);
    var withHistory = wantHistory;
    fetch('/admin/sales.json' + (withHistory ? '?history=1' : ''), { headers: { authorization: token() }, cache: 'no-store', signal: ctl.signal })
      .then(function (res) {
        if (gen !== generation) { return; }
        if (res.status === 401 || res.status === 403) {
          sessionStorage.removeItem(TOKEN_KEY);
          showLogin(res.status === 401
            ? 'That token is unknown or expired: log in again and paste the new one.'
            : 'That user is not an admin: list it in SECKILL_ADMIN_USERS.');
          return;
        }
        return res.json().then(function (body) {
          if (gen !== generation) { return; }
          if (!res.ok || !body.success) {
            setStatus('error: ' + (body.errorMsg || res.status), 'down');
          } else {
            render(body.data, body.total || 0, withHistory);
            setStatus('updated ' + new Date(body.data.at).toLocaleTimeString(), 'live');
          }
          schedule(gen);
        });
      })
      .catch(function (err) {
        if (gen !== generation) { return; }
        setStatus('unreachable: ' + (err && err.message ? err.message : err), 'down');
        schedule(gen);
      })
      .finally(function () { clearTimeout(to); });
  }

  function schedule(gen) {
    if (gen === generation) { timer = setTimeout(function () { poll(gen); }, POLL_MS); }
  }

  function render(data, total, withHistory) {
    $('queue-kind').textContent = data.queue;
    $('queue-length-box').hidden = data.queueLength === undefined;
    $('queue-length').textContent = data.queueLength === undefined ? '–' : String(data.queueLength);
    $('dead-letters-box').hidden = data.deadLetters === undefined;
    $('dead-letters').textContent = data.deadLetters === undefined ? '–' : String(data.deadLetters);
    $('sales-count').textContent = total > data.sales.length
      ? data.sales.length + ' of ' + total : String(data.sales.length);
    $('empty').hidden = data.sales.length > 0;

    var at = Date.parse(data.at);
    var seen = new Set();
    var fresh = false;
    data.sales.forEach(function (s, i) {
      seen.add(s.id);
      var c = cards.get(s.id);
      if (!c) {
        c = newCard(s.id);
        cards.set(s.id, c);
        fresh = true;
      }
      if (withHistory && s.history && !c.prev) { seed(c, s.history); }
      var list = $('sales');
      if (list.children[i] !== c.el) { list.insertBefore(c.el, list.children[i] || null); }
      update(c, s, at, data.queue);
    });
    // A sale that appeared in a plain poll gets its last minute next time.
    wantHistory = fresh && !withHistory;
    cards.forEach(function (c, id) {
      if (!seen.has(id)) {
        if (c.plot) { c.plot.destroy(); }
        c.el.remove();
        cards.delete(id);
      }
    });
  }

  function newCard(id) {
    var el = $('sale-card').content.firstElementChild.cloneNode(true);
    el.dataset.voucher = id;
    var c = { el: el, prev: null, times: [], rates: OUTCOMES.map(function () { return []; }), plot: null };
    OUTCOMES.forEach(function (o) {
      var tr = document.createElement('tr');
      tr.dataset.outcome = o;
      tr.hidden = true;
      var name = document.createElement('td');
      var sw = document.createElement('i');
      sw.className = 'sw';
      sw.style.background = COLORS[o];
      name.appendChild(sw);
      name.appendChild(document.createTextNode(o.replace('_', ' ')));
      tr.appendChild(name);
      tr.appendChild(document.createElement('td'));
      tr.appendChild(document.createElement('td'));
      el.querySelector('.outcomes tbody').appendChild(tr);
    });
    return c;
  }

  // seed fills a new card's chart with the readings the service took over
  // the last minute: the same rates a page open all along would have drawn.
  function seed(c, h) {
    for (var k = 0; k < h.at.length; k++) {
      var claims = {};
      OUTCOMES.forEach(function (o) { claims[o] = h.claims[o] ? h.claims[o][k] : 0; });
      if (c.prev && h.at[k] > c.prev.at) {
        c.times.push(h.at[k] / 1000);
        OUTCOMES.forEach(function (o, i) { c.rates[i].push(rate(claims[o], c.prev.claims[o], h.at[k] - c.prev.at)); });
      }
      c.prev = { at: h.at[k], claims: claims };
    }
  }

  function rate(n, before, ms) { return Math.max(0, n - (before || 0)) / (ms / 1000); }

  function field(c, name, text) { c.el.querySelector('[data-field="' + name + '"]').textContent = text; }

  function fmtRate(r) { return r >= 10 ? String(Math.round(r)) : r.toFixed(1); }

  function fmtMs(ms) {
    if (ms < 1000) { return ms + ' ms'; }
    if (ms < 60000) { return (ms / 1000).toFixed(1) + ' s'; }
    return Math.floor(ms / 60000) + ' min ' + Math.round((ms % 60000) / 1000) + ' s';
  }

  function update(c, s, at, queue) {
    c.el.querySelector('.title').textContent = s.title || ('voucher ' + s.id);
    var badge = c.el.querySelector('.state');
    badge.textContent = s.state.replace('_', ' ');
    badge.className = 'badge state ' + s.state;
    c.el.querySelector('.window').textContent = '#' + s.id + ' · ' + s.beginTime.replace('T', ' ') + ' → ' + s.endTime.replace('T', ' ');

    // The sale's whole stock: MySQL's stock falls by one per order it
    // writes and rises by one per unit an order gives back.
    var whole = s.balance.initial;
    var claimed = s.gateStock === undefined ? s.orders : whole - s.gateStock;
    var pct = function (n) { return whole > 0 ? Math.max(0, Math.min(100, 100 * n / whole)) + '%' : '0'; };
    c.el.querySelector('.bar-db').style.width = pct(s.orders);
    c.el.querySelector('.bar-gate').style.width = pct(claimed - s.orders);

    field(c, 'gateStock', s.gateStock === undefined ? 'not in Redis' : String(s.gateStock));
    field(c, 'dbStock', String(s.dbStock));
    field(c, 'unpaid', String(s.unpaid));
    field(c, 'paid', String(s.paid));
    field(c, 'cancelled', String(s.cancelled));
    field(c, 'refunding', String(s.refunding));
    field(c, 'returned', String(s.returned));
    field(c, 'failed', String(s.failed));
    showBalance(c, s);
    showRoom(c, s.waitingRoom);
    if (s.backlog) {
      field(c, 'backlog', s.backlog.length + ' (' + s.backlog.pending + ' pending)');
      field(c, 'lag', fmtMs(s.backlog.lagMs));
    } else {
      field(c, 'backlog', queue === 'channel' ? 'in channel ↑' : '–');
      field(c, 'lag', '–');
    }

    var sum = 0;
    var rates = OUTCOMES.map(function () { return 0; });
    OUTCOMES.forEach(function (o, i) {
      var n = s.claims[o] || 0;
      sum += n;
      if (c.prev && at > c.prev.at) { rates[i] = rate(n, c.prev.claims[o], at - c.prev.at); }
      var tr = c.el.querySelector('tr[data-outcome="' + o + '"]');
      tr.hidden = n === 0;
      tr.children[1].textContent = String(n);
      tr.children[2].textContent = fmtRate(rates[i]);
    });
    c.totals = s.claims;
    field(c, 'claims', String(sum));
    field(c, 'rate', c.prev ? fmtRate(rates.reduce(function (a, b) { return a + b; }, 0)) : '–');
    if (c.prev && at > c.prev.at) {
      c.times.push(at / 1000);
      rates.forEach(function (r, i) { c.rates[i].push(r); });
      while (c.times.length > WINDOW) {
        c.times.shift();
        c.rates.forEach(function (a) { a.shift(); });
      }
      draw(c);
    }
    c.prev = { at: at, claims: s.claims };
    // For whoever checks the page: points drawn, and readings taken live.
    c.readings = (c.readings || 0) + 1;
    c.el.dataset.readings = String(c.readings);
    c.el.dataset.points = String(c.times.length);
  }

  // showRoom writes a sale's waiting room in one line, or hides it for a
  // sale without one.
  function showRoom(c, r) {
    var el = c.el.querySelector('[data-field="room"]');
    el.hidden = !r;
    if (!r) { return; }
    var plural = function (n, one, many) { return n + ' ' + (n === 1 ? one : many); };
    el.textContent = 'Waiting room' + (r.drawn ? '' : ' (pre-queue, drawn at the start)') + ': ' +
      r.joined + ' joined' + ' · ' + r.waiting + ' waiting · ' + r.admitted + ' admitted · ' +
      plural(r.passesUsed, 'pass used', 'passes used') + ' · ' + r.passesExpired + ' expired';
  }

  // showBalance writes the sale's units as a sum, and flags it once
  // IMBALANCED_AFTER readings in a row found it broken.
  function showBalance(c, s) {
    var b = s.balance;
    var left = s.gateStock === undefined ? '? left in Redis' : s.gateStock + ' left';
    field(c, 'balance', b.initial + ' units = ' + left + ' + ' + s.unpaid + ' unpaid + ' + s.paid + ' paid + ' +
      b.inFlight + ' in flight');
    c.broken = b.holds ? 0 : (c.broken || 0) + 1;
    var flagged = c.broken >= IMBALANCED_AFTER;
    var p = c.el.querySelector('[data-field="problem"]');
    p.hidden = !flagged;
    p.textContent = flagged ? 'Books do not balance: ' + b.problem : '';
    c.el.classList.toggle('imbalanced', flagged);
  }

  function lastTime(c) { return c.times.length ? c.times[c.times.length - 1] : Date.now() / 1000; }

  function chartWidth(c) { return Math.max(200, c.el.querySelector('.chart').clientWidth); }

  function draw(c) {
    if (typeof uPlot === 'undefined') { return; }
    var data = [c.times].concat(c.rates);
    if (!c.plot) {
      c.plot = new uPlot({
        width: chartWidth(c),
        height: 160,
        legend: { show: false },
        cursor: { show: false },
        // The last minute, always: with no claim in it uPlot would range
        // over whatever it was given, down to years of empty axis.
        scales: {
          x: { time: true, range: function (u, min, max) { var end = lastTime(c); return [end - WINDOW, end]; } },
          y: { range: function (u, min, max) { return [0, Math.max(1, max)]; } }
        },
        axes: [{ size: 30 }, { size: 44, label: 'claims/s', labelSize: 14 }],
        series: [{}].concat(OUTCOMES.map(function (o) {
          return { label: o, stroke: COLORS[o], width: 1.5, points: { show: false } };
        }))
      }, data, c.el.querySelector('.chart'));
      c.el.querySelector('.chart').uplot = c.plot; // for the browser test
    } else {
      c.plot.setData(data);
    }
    // Only outcomes that happened get a line: eight flat zeros hide the rest.
    c.shown = c.shown || {};
    OUTCOMES.forEach(function (o, i) {
      var show = c.totals[o] > 0;
      if (c.shown[o] !== show) { c.plot.setSeries(i + 1, { show: show }); c.shown[o] = show; }
    });
  }

  window.addEventListener('resize', function () {
    cards.forEach(function (c) { if (c.plot) { c.plot.setSize({ width: chartWidth(c), height: 160 }); } });
  });

  if (token()) { start(); } else { showLogin(''); }
})();
