// The live sale page and operator's console: polls GET /admin/sales.json
// once a second with the admin's token and draws each sale; creates sales,
// controls them (pause, resume, end, move the end, add stock), lists their
// orders, downloads them as CSV and reads the audit trail. No build step, no
// framework: the DOM and uPlot (vendored beside this file). Server strings
// go in through textContent only, never as HTML; the token goes in the
// authorization header only, never in a URL (URLs land in access logs,
// history and Referer headers).
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
  var OUTCOMES = ['success', 'sold_out', 'duplicate', 'not_started', 'paused', 'ended', 'not_found', 'busy', 'error'];
  var COLORS = {
    success: '#16a34a', sold_out: '#f59e0b', duplicate: '#8b5cf6', not_started: '#64748b', paused: '#db2777',
    ended: '#94a3b8', not_found: '#0ea5e9', busy: '#ef4444', error: '#7f1d1d'
  };
  // An action waits longer than a poll: a control writes MySQL and the gate.
  var ACTION_TIMEOUT_MS = 10000;
  var PAGE = 20; // orders or audit entries a page of the console shows

  var $ = function (id) { return document.getElementById(id); };
  var cards = new Map(); // voucher id -> card state
  var timer = null;
  var generation = 0; // a poll of an older session must not schedule another
  // The first poll, and the one after a sale's card appears, asks for the
  // last minute of claims so the chart starts with it instead of empty.
  var wantHistory = true;
  // The records panel: whose orders (voucher, state) and the cursors of
  // the next orders page and the next (older) audit page; gen drops the
  // answers of a request made for an earlier choice, auditGen those made
  // before the trail was read again.
  var records = { voucher: '', state: '', after: '', before: '', gen: 0, auditGen: 0 };

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
    forgetBoard();
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
    showRecords('', '', false);
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

  // send makes one request with the token in its authorization header and
  // asks for English errorMsgs; timeoutMs 0 never aborts (a download).
  function send(method, path, body, extra, timeoutMs) {
    var ctl = new AbortController();
    var to = timeoutMs === 0 ? null : setTimeout(function () { ctl.abort(); }, timeoutMs || ACTION_TIMEOUT_MS);
    var headers = { authorization: token(), 'Accept-Language': 'en' };
    Object.keys(extra || {}).forEach(function (k) { headers[k] = extra[k]; });
    var init = { method: method, headers: headers, cache: 'no-store', signal: ctl.signal, credentials: 'omit' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    return fetch(path, init).finally(function () { if (to) { clearTimeout(to); } });
  }

  // refused ends the session on a 401 or 403 of any request: the page
  // forgets the token and everything it showed, and says why, with the
  // service's own words. A 403 has changed nothing.
  function refused(status, errorMsg) {
    sessionStorage.removeItem(TOKEN_KEY);
    var why = status === 401
      ? 'That token is unknown or expired: log in again and paste the new one.'
      : 'That user is not an admin, so every action is refused and nothing was changed: log in with the token of a user listed in SECKILL_ADMIN_USERS.';
    showLogin((errorMsg ? errorMsg + ' (' + status + '). ' : 'Refused (' + status + '). ') + why);
    $('login').classList.add('refused');
  }

  // envelope reads an answer's JSON envelope; a body that is not one (a
  // proxy's error page) becomes one that says so.
  function envelope(res) {
    return res.json().catch(function () { return { success: false, errorMsg: 'HTTP ' + res.status + ' (not a JSON answer)' }; });
  }

  // say writes an action's outcome where the operator looks for it.
  function say(el, text, cls) {
    el.textContent = text;
    el.className = 'result ' + (cls || '');
  }

  // act runs one action and shows its outcome in el: the service's
  // errorMsg verbatim when refused. It resolves {done, env} on success,
  // {done: false, unknown} otherwise: unknown when no answer tells whether
  // the action was applied.
  function act(el, method, path, body, extra) {
    say(el, 'sending…', 'busy');
    return send(method, path, body, extra).then(function (res) {
      return envelope(res).then(function (env) {
        if (res.status === 401 || res.status === 403) {
          refused(res.status, env.errorMsg);
          return { done: false, unknown: false };
        }
        if (!res.ok || !env.success) {
          say(el, env.errorMsg || ('HTTP ' + res.status), 'error');
          // A 5xx may have been applied (or not): a retry must carry the
          // same Idempotency-Key.
          return { done: false, unknown: res.status >= 500 };
        }
        return { done: true, env: env };
      });
    }, function (err) {
      say(el, 'no answer: ' + (err && err.name === 'AbortError' ? 'timed out' : (err && err.message) || err) +
        ' (sending again is safe)', 'error');
      return { done: false, unknown: true };
    });
  }

  // newKey is an Idempotency-Key: one per thing the operator asks for, kept
  // until an answer says whether it was done, so a double click or a retry
  // after a lost answer is applied once. getRandomValues works on plain
  // http too, unlike crypto.randomUUID.
  function newKey() {
    var b = new Uint8Array(16);
    crypto.getRandomValues(b);
    return Array.prototype.map.call(b, function (x) { return (x < 16 ? '0' : '') + x.toString(16); }).join('');
  }

  function poll(gen) {
    var withHistory = wantHistory;
    send('GET', '/admin/sales.json' + (withHistory ? '?history=1' : ''), undefined, undefined, TIMEOUT_MS)
      .then(function (res) {
        if (gen !== generation) { return; }
        return envelope(res).then(function (body) {
          if (gen !== generation) { return; }
          if (res.status === 401 || res.status === 403) {
            refused(res.status, body.errorMsg);
            return;
          }
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
      });
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
    wireControls(c, id);
    return c;
  }

  // wireControls makes the card's buttons and forms act on its sale.
  function wireControls(c, id) {
    var el = c.el;
    var base = '/admin/vouchers/' + encodeURIComponent(id);
    var result = el.querySelector('[data-field="result"]');
    var button = function (name) { return el.querySelector('[data-action="' + name + '"]'); };
    var confirmRow = el.querySelector('.confirm');

    var pauseOrResume = function (paused) {
      act(result, 'POST', base + (paused ? '/pause' : '/resume')).then(function (o) {
        if (!o.done) { return; }
        showPaused(c, o.env.data.paused);
        say(result, o.env.data.paused
          ? 'Paused: claims answer paused until you resume it.'
          : 'Resumed: claims are taken again.', 'ok');
        auditChanged(id);
      });
    };
    button('pause').addEventListener('click', function () { pauseOrResume(true); });
    button('resume').addEventListener('click', function () { pauseOrResume(false); });

    button('end').addEventListener('click', function () { confirmRow.hidden = false; });
    button('end-cancel').addEventListener('click', function () { confirmRow.hidden = true; });
    button('end-confirm').addEventListener('click', function () {
      confirmRow.hidden = true;
      act(result, 'POST', base + '/end').then(function (o) {
        if (!o.done) { return; }
        say(result, 'Ended at ' + utc(o.env.data.endTime) + '.', 'ok');
        // The board lists sales not ended: the card goes at the next
        // reading, its records stay below.
        showRecords(id, 'Sale #' + id + ' ended at ' + utc(o.env.data.endTime) + ': its orders and audit trail are below.');
      });
    });

    button('records').addEventListener('click', function () { showRecords(id, ''); });

    var stockForm = el.querySelector('.add-stock');
    var stockKey = null;
    stockForm.addEventListener('input', function () { stockKey = null; });
    stockForm.addEventListener('submit', function (e) {
      e.preventDefault();
      var n = Number(stockForm.elements.namedItem('add').value);
      stockKey = stockKey || newKey();
      var key = stockKey;
      act(result, 'POST', base + '/stock', { add: n }, { 'Idempotency-Key': key }).then(function (o) {
        if (o.unknown) { return; } // the same key goes with the operator's retry
        if (stockKey === key) { stockKey = null; }
        if (!o.done) { return; }
        // Emptied, so the second click of a double click sends nothing.
        stockForm.elements.namedItem('add').value = '';
        say(result, 'Added ' + n + ': ' + o.env.data.stock + ' left in MySQL, ' + o.env.data.added + ' added in all.', 'ok');
        auditChanged(id);
      });
    });

    var endForm = el.querySelector('.move-end');
    endForm.addEventListener('submit', function (e) {
      e.preventDefault();
      var end = new Date(endForm.elements.endTime.value);
      if (isNaN(end.getTime())) {
        say(result, 'Pick the new end time first.', 'error');
        return;
      }
      act(result, 'PUT', base + '/end-time', { endTime: end.toISOString() }).then(function (o) {
        if (!o.done) { return; }
        say(result, 'Ends at ' + utc(o.env.data.endTime) + '.', 'ok');
        auditChanged(id);
      });
    });
  }

  function showPaused(c, paused) {
    c.el.querySelector('[data-action="pause"]').hidden = paused;
    c.el.querySelector('[data-action="resume"]').hidden = !paused;
    c.el.querySelector('.badge.paused').hidden = !paused;
    c.el.dataset.paused = String(paused);
  }

  // utc writes an RFC 3339 time as the console's tables do.
  function utc(t) {
    var d = new Date(t);
    return isNaN(d.getTime()) ? String(t) : d.toISOString().slice(0, 19).replace('T', ' ') + ' UTC';
  }

  // forgetBoard drops everything a session showed, so a page left to
  // another user (or refused) shows none of it.
  function forgetBoard() {
    cards.forEach(function (c) {
      if (c.plot) { c.plot.destroy(); }
      c.el.remove();
    });
    cards.clear();
    records = { voucher: '', state: '', after: '', before: '', gen: records.gen + 1, auditGen: records.auditGen + 1 };
    $('records-form').reset();
    $('orders-box').hidden = true;
    $('orders').tBodies[0].textContent = '';
    $('audit').tBodies[0].textContent = '';
    $('audit-scope').textContent = '';
    $('audit-more').hidden = true;
    $('audit-empty').hidden = true;
    document.querySelectorAll('#board [data-result]').forEach(function (p) { say(p, '', ''); });
    createKey = null; // the next admin's creation is theirs
    $('login').classList.remove('refused');
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
    showPaused(c, !!s.paused);

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

  // ---- creating a sale ----

  var createForm = $('create-form');
  var createKey = null; // the key of what the form holds: a resend gets the same sale
  createForm.addEventListener('input', function () { createKey = null; });
  createForm.elements.room.addEventListener('change', function () {
    createForm.querySelectorAll('.room-fields .fields input').forEach(function (i) { i.disabled = !createForm.elements.room.checked; });
  });
  createForm.addEventListener('submit', function (e) {
    e.preventDefault();
    var f = createForm.elements;
    var result = createForm.querySelector('[data-result]');
    var when = function (input) { var d = new Date(input.value); return isNaN(d.getTime()) ? input.value : d.toISOString(); };
    var num = function (input) { return input.value === '' ? undefined : Number(input.value); };
    var body = {
      shopId: num(f.shopId), title: f.title.value, subTitle: f.subTitle.value, rules: f.rules.value,
      payValue: num(f.payValue), actualValue: num(f.actualValue), type: 1, stock: num(f.stock),
      beginTime: when(f.beginTime), endTime: when(f.endTime), buckets: num(f.buckets),
      limitPerUser: num(f.limitPerUser)
    };
    if (f.room.checked) {
      body.waitingRoom = {
        opensBeforeSeconds: num(f.opensBeforeSeconds), admitPerSecond: num(f.admitPerSecond),
        passTtlSeconds: num(f.passTtlSeconds), margin: num(f.margin)
      };
    }
    createKey = createKey || newKey();
    act(result, 'POST', '/voucher/seckill', body, { 'Idempotency-Key': createKey }).then(function (o) {
      if (o.done) {
        result.dataset.created = o.env.data;
        say(result, 'Created sale #' + o.env.data + (body.waitingRoom ? ', with its waiting room.' : '.'), 'ok');
        auditChanged(o.env.data);
      }
    });
  });

  // ---- orders and the audit trail ----

  $('records-form').addEventListener('submit', function (e) {
    e.preventDefault();
    var f = $('records-form').elements;
    showRecords(f.voucher.value.trim(), '');
  });

  // showRecords shows a sale's orders (in the state chosen) and audit
  // trail, or with no voucher the whole trail.
  function showRecords(voucher, note, scroll) {
    var f = $('records-form').elements;
    f.voucher.value = voucher;
    records = { voucher: voucher, state: f.state.value, after: '', before: '', gen: records.gen + 1, auditGen: records.auditGen + 1 };
    say($('records-note'), note, note ? 'ok' : '');
    $('orders').tBodies[0].textContent = '';
    $('audit').tBodies[0].textContent = '';
    $('orders-box').hidden = !voucher;
    $('orders-voucher').textContent = voucher;
    $('audit-scope').textContent = voucher ? 'of sale #' + voucher : 'of every sale';
    if (voucher) { loadOrders(); }
    loadAudit();
    if (scroll !== false) { $('records').scrollIntoView({ block: 'start' }); }
  }

  // auditChanged reads the trail again after an action on the sale, when
  // the panel shows that sale's trail or every sale's.
  function auditChanged(voucher) {
    if (records.voucher && records.voucher !== voucher) { return; }
    records.auditGen++;
    records.before = '';
    $('audit').tBodies[0].textContent = '';
    loadAudit();
  }

  // load reads one page for the records panel; it ignores an answer that
  // current() says is out of date.
  function load(path, current, then) {
    var el = $('records-status');
    act(el, 'GET', path).then(function (o) {
      if (!current() || !o.done) { return; }
      if (el.className.indexOf('busy') >= 0) { say(el, '', ''); }
      then(o.env.data);
    });
  }

  function cell(tr, text) {
    var td = document.createElement('td');
    td.textContent = text;
    tr.appendChild(td);
  }

  function loadOrders() {
    var q = '?limit=' + PAGE + (records.state ? '&state=' + encodeURIComponent(records.state) : '') +
      (records.after ? '&after=' + encodeURIComponent(records.after) : '');
    var gen = records.gen;
    load('/admin/vouchers/' + encodeURIComponent(records.voucher) + '/orders' + q, function () { return gen === records.gen; }, function (page) {
      var body = $('orders').tBodies[0];
      page.orders.forEach(function (o) {
        var tr = document.createElement('tr');
        tr.dataset.order = o.id;
        cell(tr, o.id);
        cell(tr, o.userId);
        cell(tr, o.state + (o.reason ? ' (' + o.reason + ')' : ''));
        cell(tr, o.claimedAt ? utc(o.claimedAt) : '');
        cell(tr, o.payDeadline ? utc(o.payDeadline) : '');
        cell(tr, o.paidAt ? utc(o.paidAt) : '');
        body.appendChild(tr);
      });
      records.after = page.next || '';
      $('orders-more').hidden = !page.next;
      $('orders-empty').hidden = body.rows.length > 0;
    });
  }

  function loadAudit() {
    var q = '?limit=' + PAGE + (records.voucher ? '&voucher=' + encodeURIComponent(records.voucher) : '') +
      (records.before ? '&before=' + encodeURIComponent(records.before) : '');
    var gen = records.gen, auditGen = records.auditGen;
    load('/admin/audit' + q, function () { return gen === records.gen && auditGen === records.auditGen; }, function (page) {
      var body = $('audit').tBodies[0];
      page.entries.forEach(function (a) {
        var tr = document.createElement('tr');
        tr.dataset.action = a.action;
        cell(tr, utc(a.at));
        cell(tr, a.adminId);
        cell(tr, a.action);
        cell(tr, a.voucherId);
        cell(tr, JSON.stringify(a.change));
        body.appendChild(tr);
      });
      records.before = page.next || '';
      $('audit-more').hidden = !page.next;
      $('audit-empty').hidden = body.rows.length > 0;
    });
  }

  $('orders-more').addEventListener('click', loadOrders);
  $('audit-more').addEventListener('click', loadAudit);

  // The CSV is fetched with the token in its header and handed to the
  // browser as a blob: a plain link could carry the token only in its URL.
  $('orders-csv').addEventListener('click', function () {
    var el = $('records-status');
    var gen = records.gen;
    var path = '/admin/vouchers/' + encodeURIComponent(records.voucher) + '/orders.csv' +
      (records.state ? '?state=' + encodeURIComponent(records.state) : '');
    say(el, 'downloading…', 'busy');
    send('GET', path, undefined, undefined, 0).then(function (res) {
      if (!res.ok) {
        return envelope(res).then(function (env) {
          if (res.status === 401 || res.status === 403) { refused(res.status, env.errorMsg); return; }
          say(el, env.errorMsg || ('HTTP ' + res.status), 'error');
        });
      }
      var m = /filename="([^"]+)"/.exec(res.headers.get('Content-Disposition') || '');
      var name = m ? m[1] : 'orders.csv';
      return res.blob().then(function (blob) {
        if (gen !== records.gen) { return; }
        var url = URL.createObjectURL(blob);
        var a = document.createElement('a');
        a.href = url;
        a.download = name;
        a.hidden = true;
        document.body.appendChild(a);
        a.click();
        a.remove();
        // Chromium has the blob once the download starts; revoke it later.
        setTimeout(function () { URL.revokeObjectURL(url); }, 60000);
        say(el, 'Downloaded ' + name + ' (' + blob.size + ' bytes).', 'ok');
      });
    }).catch(function (err) {
      say(el, 'download failed: ' + ((err && err.message) || err), 'error');
    });
  });

  // The times typed in are the browser's: say which zone that is.
  (function () {
    var off = -new Date().getTimezoneOffset();
    var abs = Math.abs(off);
    var tz = 'UTC' + (off < 0 ? '−' : '+') + ('0' + Math.floor(abs / 60)).slice(-2) + ':' + ('0' + abs % 60).slice(-2);
    document.querySelectorAll('#create .tz').forEach(function (el) { el.textContent = '(' + tz + ')'; });
    $('sale-card').content.querySelectorAll('.tz').forEach(function (el) { el.textContent = '(' + tz + ')'; });
  })();

  window.addEventListener('resize', function () {
    cards.forEach(function (c) { if (c.plot) { c.plot.setSize({ width: chartWidth(c), height: 160 }); } });
  });

  if (token()) { start(); } else { showLogin(''); }
})();
