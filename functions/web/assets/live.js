// Live pages: follow the page's own URL as server-sent events and, on each change, fetch the
// page again and put its new <main> in place. Without JavaScript the page is the same, only
// not live. No dependencies, no build step.
(function () {
  "use strict";
  var main = document.querySelector("main[data-live]");
  if (!main || !window.EventSource || !window.fetch || !window.DOMParser) return;
  var note = document.querySelector(".live-note");
  var busy = false, again = false;

  function say(text) { if (note) note.textContent = text; }

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.href, { headers: { Accept: "text/html" }, credentials: "same-origin", cache: "no-store" })
      .then(function (r) { if (!r.ok) throw new Error(String(r.status)); return r.text(); })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, "text/html");
        var next = doc.querySelector("main[data-live]");
        if (!next) return;
        var focused = document.activeElement && document.activeElement.id;
        var field = focused && document.getElementById(focused);
        var value = field && "value" in field ? field.value : null;
        main.innerHTML = next.innerHTML;
        main.dataset.seq = next.dataset.seq;
        var time = doc.querySelector("footer time");
        var mine = document.querySelector("footer time");
        if (time && mine) { mine.replaceWith(time); }
        if (focused) {
          var el = document.getElementById(focused);
          if (el) { if (value !== null) el.value = value; el.focus(); }
        }
        document.documentElement.dataset.refreshed = String(Date.now());
        say(" · live");
      })
      .catch(function () { say(" · live updates paused"); })
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }

  // The stream starts with a change if anything changed since this page was rendered.
  var url = new URL(location.href);
  url.searchParams.set("since", main.dataset.seq || "0");
  var source = new EventSource(url.toString());
  source.addEventListener("open", function () { say(" · live"); });
  source.addEventListener("change", refresh);
  source.addEventListener("error", function () { say(" · reconnecting"); });
})();
