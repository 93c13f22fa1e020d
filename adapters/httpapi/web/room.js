// The waiting room's page: join a sale's room, watch the place move, and buy
// with the pass once admitted. The voucher is ?voucher=<id>; the login token
// is hmdp's, read from sessionStorage like its own pages.
(function () {
  'use strict';
  var TOKEN_KEY = 'token';
  var voucher = new URLSearchParams(location.search).get('voucher') || '';
  var ticketKey = 'room-ticket:' + voucher;
  var timer = null;
  var pass = '';
  var STATES = { pre_queue: '等待开抢抽签', waiting: '排队中', admitted: '轮到您了', expired: '资格已过期', sold_out: '已售罄' };

  function $(id) { return document.getElementById(id); }
  function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }
  function showError(msg) { $('error').textContent = msg || ''; }

  function call(method, url, headers) {
    var h = { authorization: token() };
    for (var k in headers || {}) { h[k] = headers[k]; }
    return fetch(url, { method: method, headers: h, cache: 'no-store' }).then(function (res) {
      if (res.status === 401) {
        sessionStorage.removeItem(TOKEN_KEY);
        showLogin();
        throw new Error('未登录或登录已过期');
      }
      return res.json().then(function (env) {
        if (!env.success) { throw new Error(env.errorMsg || '服务器异常'); }
        return env.data;
      }, function () { throw new Error('服务器异常'); });
    });
  }

  function render(st) {
    sessionStorage.setItem(ticketKey, st.ticket);
    $('status').hidden = false;
    $('join').hidden = true;
    $('state').textContent = STATES[st.state] || st.state;
    $('state').dataset.state = st.state;
    $('position').textContent = st.position ? String(st.position) : '开抢时抽签决定';
    // Absent in the pre-queue: the order is drawn at the start.
    $('ahead').textContent = st.ahead === undefined ? '开抢时抽签决定' : String(st.ahead);
    $('wait').textContent = st.waitSeconds + ' 秒';
    $('joined').textContent = String(st.joined);
    pass = st.pass || '';
    $('buy').hidden = st.state !== 'admitted';
  }

  function poll() {
    var t = sessionStorage.getItem(ticketKey);
    if (!t) { return; }
    call('GET', '/voucher-order/room/' + encodeURIComponent(voucher) + '?ticket=' + encodeURIComponent(t))
      .then(function (st) { showError(''); render(st); }, function (e) { showError(e.message); });
  }

  function startPolling() {
    if (timer === null) { timer = setInterval(poll, 1000); }
    poll();
  }

  function join() {
    call('POST', '/voucher-order/room/' + encodeURIComponent(voucher) + '/join')
      .then(function (st) { showError(''); render(st); startPolling(); }, function (e) { showError(e.message); });
  }

  function buy() {
    call('POST', '/voucher-order/seckill/' + encodeURIComponent(voucher), { 'X-Room-Pass': pass })
      .then(function (orderId) {
        $('result').textContent = '抢购成功，订单号 ' + orderId;
        $('result').dataset.order = orderId;
        $('buy').hidden = true;
        clearInterval(timer);
      }, function (e) { $('result').textContent = e.message; });
  }

  function showLogin() { $('login').hidden = false; $('room').hidden = true; }
  function showRoom() {
    $('login').hidden = true;
    $('room').hidden = false;
    if (sessionStorage.getItem(ticketKey)) { startPolling(); }
  }

  $('login').addEventListener('submit', function (ev) {
    ev.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, $('token').value.trim());
    showRoom();
  });
  $('join').addEventListener('click', join);
  $('buy').addEventListener('click', buy);
  if (!/^[0-9]+$/.test(voucher)) {
    showError('链接缺少优惠券编号（?voucher=）');
    return;
  }
  if (token()) { showRoom(); } else { showLogin(); }
})();
