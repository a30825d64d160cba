"""The HTML report's inline stylesheet and its one small script (filter and expand/collapse the session list).

Both are constants: the page must open from a file with no network, so nothing is linked or fetched. The
script reads only the page's own data-* attributes and the filter values in the URL fragment (`#q=…&reason=…
&failing=1`, so a filtered view can be linked), and never inserts markup (textContent / attributes only).
"""

CSS = """
:root { --ok: #2e7d32; --bad: #c62828; --muted: #666; --line: #ddd; --bg: #fafafa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "Noto Sans CJK SC",
       sans-serif;
       margin: 0 auto; max-width: 1180px; padding: 16px 24px 48px; color: #222; }
h1 { font-size: 22px; margin: 8px 0 2px; }
h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 15px; margin: 14px 0 6px; }
.meta { color: var(--muted); margin: 0 0 12px; }
table { border-collapse: collapse; margin: 6px 0 14px; }
caption { text-align: left; font-weight: 600; padding: 2px 0; }
th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.tables { display: flex; flex-wrap: wrap; gap: 4px 28px; align-items: flex-start; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
svg.chart { background: var(--bg); border: 1px solid var(--line); border-radius: 4px; }
svg .chart-title { font-weight: 600; font-size: 13px; }
svg .tick, svg .category, svg .bar-value, svg .na, svg .legend-label { font-size: 10px; fill: #444; }
svg .axis-label { font-size: 11px; fill: #444; }
svg .grid { stroke: #e4e4e4; }
svg .marker { stroke: #999; stroke-dasharray: 4 3; }
svg .error-bar line { stroke-width: 1.4; }
.ci { color: var(--muted); font-size: 12px; white-space: nowrap; }
.verdict { font-weight: 600; font-size: 15px; }
.pass { color: var(--ok); font-weight: 600; }
.fail { color: var(--bad); font-weight: 600; }
.delta-up { color: var(--ok); } .delta-down { color: var(--bad); }
.badge { display: inline-block; padding: 0 6px; border-radius: 8px; font-size: 12px; background: #eee; }
.badge.excluded { background: #fff3cd; }
.badge.completed { background: #e8f5e9; }
.controls { display: flex; gap: 10px; align-items: center; margin: 8px 0; flex-wrap: wrap; }
details.session { border: 1px solid var(--line); border-radius: 4px; margin: 6px 0; background: #fff; }
details.session > summary { cursor: pointer; padding: 6px 10px; background: var(--bg); }
details.session[data-excluded="true"] > summary { background: #fffbea; }
.turn { padding: 6px 12px 10px; border-top: 1px solid var(--line); }
.conversation { list-style: none; padding: 0; margin: 4px 0 8px; }
.conversation li { margin: 3px 0; padding: 4px 8px; border-radius: 4px; white-space: pre-wrap;
                   overflow-wrap: anywhere; }
.conversation .who { font-weight: 600; margin-right: 6px; white-space: normal; }
.x-doctor { background: #e3f2fd; } .x-assistant { background: #f1f8e9; } .x-patient { background: #fce4ec; }
.x-question, .x-clarification { background: #fff8e1; } .x-tool { background: #f3e5f5; }
.x-ehr { background: #f5f5f5; font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; }
.status-ok { color: var(--ok); } .status-err { color: var(--bad); }
tr.improved td { background: #eef8ee; } tr.regressed td { background: #fdecec; }
td.session-label { background: #fff !important; }
.precision h4 { margin: 6px 0 2px; font-size: 0.9em; }
.precision ul.claims { margin: 0 0 6px; }
td.evidence { max-width: 520px; white-space: pre-wrap; overflow-wrap: anywhere; }
"""

SCRIPT = """
document.querySelectorAll('section.sessions').forEach(function (section) {
  var input = section.querySelector('.session-filter');
  var reason = section.querySelector('.reason-filter');
  var failing = section.querySelector('.failing-filter');
  var count = section.querySelector('.session-count');
  var items = section.querySelectorAll('details.session');
  // a link can carry a filter: report.html#q=glucose&reason=timeout&failing=1 (values only, never markup)
  var params = new URLSearchParams(location.hash.replace(/^#/, ''));
  input.value = params.get('q') || '';
  if (params.get('reason')) { reason.value = params.get('reason'); }
  failing.checked = params.get('failing') === '1';
  function apply() {
    var q = input.value.trim().toLowerCase(), r = reason.value, shown = 0;
    items.forEach(function (d) {
      var ok = (!q || (d.getAttribute('data-search') || '').indexOf(q) >= 0) &&
               (!r || d.getAttribute('data-reason') === r) &&
               (!failing.checked || d.getAttribute('data-failing') === 'true');
      d.hidden = !ok; if (ok) { shown += 1; }
    });
    count.textContent = String(shown);
  }
  [input, reason, failing].forEach(function (el) { el.addEventListener('input', apply); });
  failing.addEventListener('change', apply);
  section.querySelector('.expand-all').addEventListener('click', function () {
    items.forEach(function (d) { if (!d.hidden) { d.open = true; } });
  });
  section.querySelector('.collapse-all').addEventListener('click', function () {
    items.forEach(function (d) { d.open = false; });
  });
  apply();
  section.setAttribute('data-ready', 'true');
});
"""
