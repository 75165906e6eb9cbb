// mesos-appliance dashboard: keeps server-rendered pages live.
// Pages work without this script. With it, each new scheduler snapshot
// (server-sent events from /api/v1/stream) re-fetches the current page and
// swaps its #live part, the header and the banners. When the stream breaks,
// a "scheduler unreachable" notice shows (with the server's reason when it
// ended the stream with a `shutdown` event) and reconnects back off (1 s, 2 s,
// 4 s ... 30 s). Without EventSource it polls the page every 5 s. Hidden
// pages hold no stream.
(function () {
  "use strict";

  // Confirmation pages: enable the button once the typed name matches.
  // (The server checks again.)
  var form = document.getElementById("confirm-form");
  if (form) {
    var input = document.getElementById("confirm-name");
    var submit = document.getElementById("confirm-submit");
    var expect = form.getAttribute("data-expect");
    var check = function () { submit.disabled = input.value.trim() !== expect; };
    input.addEventListener("input", check);
    check();
  }
  // Filter selects submit on change.
  var filters = document.getElementById("task-filters");
  if (filters) {
    filters.querySelectorAll("select").forEach(function (s) {
      s.addEventListener("change", function () { filters.submit(); });
    });
  }

  // Task logs: <pre class="log" data-src="/api/v1/tasks/ID/logs/FILE"
  // data-follow="tail|on|off" data-next="N">. "tail" loads the end of the
  // file first; "on" continues from data-next. New bytes are then asked
  // for from next_offset every 2 s and appended as text (never as HTML);
  // the element keeps the last 256 KiB. After a failure the error shows
  // and retries back off (5 s, 10 s, 30 s, then every 30 s) until a read
  // succeeds, so that a slow master is not asked again every few seconds.
  var MAX_LOG_CHARS = 262144;
  var LOG_RETRY_MS = [5000, 10000, 30000];
  document.querySelectorAll("pre.log[data-src]").forEach(function (pre) {
    var mode = pre.getAttribute("data-follow");
    if (mode === "off") return;
    var src = pre.getAttribute("data-src");
    var next = mode === "tail" ? null : parseInt(pre.getAttribute("data-next"), 10);
    // stdout-log reports in stdout-status; the log page's pre in log-status.
    var status = document.getElementById(
      /-log$/.test(pre.id) ? pre.id.replace(/-log$/, "-status") : "log-status");
    function say(text) { if (status) status.textContent = text; }
    var failures = 0;
    function retry(why) {
      var wait = LOG_RETRY_MS[Math.min(failures, LOG_RETRY_MS.length - 1)];
      failures += 1;
      say(why + " · retrying in " + wait / 1000 + " s");
      setTimeout(step, wait);
    }
    function step() {
      if (document.hidden) { setTimeout(step, 2000); return; }
      var url = src + (next === null ? "" : "?offset=" + next + "&length=65536");
      fetch(url, { headers: { "Accept": "application/json" }, cache: "no-store", credentials: "same-origin" })
        .then(function (r) { return r.json().then(function (j) { return { ok: r.ok, body: j }; }); })
        .then(function (res) {
          if (!res.ok) {
            retry((res.body.title || "error") + ": " + (res.body.detail || ""));
            return;
          }
          failures = 0;
          var log = res.body;
          var bottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 8;
          if (log.text) {
            pre.textContent = (pre.textContent + log.text).slice(-MAX_LOG_CHARS);
            if (bottom) pre.scrollTop = pre.scrollHeight;
          }
          next = log.next_offset;
          say("following · " + log.size + " bytes");
          setTimeout(step, log.next_offset < log.size ? 0 : 2000);
        })
        .catch(function () { retry("cannot reach the server"); });
    }
    step();
  });

  if (document.body.getAttribute("data-live") !== "on") return;

  var notice = document.getElementById("notice");
  var noticeText = document.getElementById("notice-text");
  var status = document.getElementById("live-status");
  var backoff = 1000, MAX_BACKOFF = 30000, MIN_GAP = 2000;
  var lastRefresh = 0, pending = null, source = null, retryTimer = null;

  function unreachable(why) {
    notice.hidden = false;
    document.body.classList.add("stale");
    noticeText.textContent = why + "; retrying in " + Math.round(backoff / 1000) + " s (the page shows the last data received)";
    if (status) status.textContent = "not live";
  }
  function reachable() {
    notice.hidden = true;
    document.body.classList.remove("stale");
    backoff = 1000;
    if (status) status.textContent = "live";
  }
  function busy() {
    var a = document.activeElement;
    var live = document.getElementById("live");
    if (a && live && live.contains(a) && /^(INPUT|SELECT|TEXTAREA)$/.test(a.tagName)) return true;
    // A reason typed into an action form but not sent yet.
    return !!live && Array.prototype.some.call(live.querySelectorAll("input.reason"),
      function (i) { return i.value !== ""; });
  }
  function swap(doc, id) {
    var now = document.getElementById(id), next = doc.getElementById(id);
    if (now && next) now.replaceWith(next);
  }
  function refresh() {
    pending = null;
    if (busy()) { schedule(); return; }
    lastRefresh = Date.now();
    fetch(location.href, { headers: { "Accept": "text/html" }, cache: "no-store", credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok && r.status >= 500 && r.status !== 503) throw new Error("HTTP " + r.status);
        return r.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        ["top", "banners", "live"].forEach(function (id) { swap(doc, id); });
        reachable();
      })
      .catch(function () { unreachable("cannot load this page"); });
  }
  function schedule() {
    if (pending) return;
    var wait = Math.max(0, MIN_GAP - (Date.now() - lastRefresh));
    pending = setTimeout(refresh, wait);
  }
  function retry(why) {
    if (source) { source.close(); source = null; }
    unreachable(why);
    clearTimeout(retryTimer);
    retryTimer = setTimeout(connect, backoff);
    backoff = Math.min(backoff * 2, MAX_BACKOFF);
  }
  // The snapshot time the page shows; a newer one triggers a refresh.
  var shownAt = parseFloat(document.body.getAttribute("data-at")) || 0;
  function connect() {
    if (!window.EventSource) { poll(); return; }
    source = new EventSource("/api/v1/stream");
    source.addEventListener("open", reachable);
    source.addEventListener("snapshot", function (e) {
      var at = 0;
      try { at = JSON.parse(e.data).at; } catch (_) { /* refresh anyway */ }
      if (!at || at !== shownAt) { shownAt = at; schedule(); }
    });
    // The replica stops: say so, not a bare "lost".
    source.addEventListener("shutdown", function (e) {
      var why = "the replica is shutting down";
      try { why = JSON.parse(e.data).reason || why; } catch (_) { /* keep the default */ }
      retry(why);
    });
    source.addEventListener("error", function () { retry("lost the live stream"); });
  }
  // A browser keeps at most six HTTP/1.1 connections per server: a stream
  // left open by a page in the back/forward cache or a hidden tab would
  // starve navigation. Close it when the page is hidden, reopen when shown.
  function disconnect() {
    clearTimeout(retryTimer);
    if (source) { source.close(); source = null; }
  }
  window.addEventListener("pagehide", disconnect);
  window.addEventListener("pageshow", function (e) { if (e.persisted && !source) connect(); });
  document.addEventListener("visibilitychange", function () {
    if (document.hidden) disconnect(); else if (!source) connect();
  });
  function poll() {
    setTimeout(function () {
      fetch(location.href, { cache: "no-store" }).then(function () { refresh(); poll(); })
        .catch(function () { unreachable("cannot reach the server"); backoff = Math.min(backoff * 2, MAX_BACKOFF); poll(); });
    }, Math.max(5000, backoff));
  }
  connect();
})();
