// cuset view: the glue between the pages' forms and their tables: the sample table
// (index.html, a Tabulator table) and the per-task comparison (compare.html). Data comes
// from the JSON element #viewer-data; every value reaches the page through textContent or
// a link built from our own paths, never through innerHTML.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("viewer-data").textContent);

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }
  function link(href, text, cls) {
    var a = el("a", text, cls);
    a.setAttribute("href", href);
    return a;
  }
  function hashParams() {
    var out = {};
    location.hash.replace(/^#/, "").split("&").forEach(function (part) {
      if (!part) return;
      var i = part.indexOf("=");
      var key = decodeURIComponent(i < 0 ? part : part.slice(0, i));
      out[key] = i < 0 ? "" : decodeURIComponent(part.slice(i + 1));
    });
    return out;
  }
  function fillSelect(select, values) {
    values.forEach(function (v) {
      var o = el("option", v);
      o.value = v;
      select.appendChild(o);
    });
  }
  function uniq(values) {
    var seen = {}, out = [];
    values.forEach(function (v) { if (!(v in seen)) { seen[v] = 1; out.push(v); } });
    return out.sort();
  }

  // The tables are Tabulator's (assets/tabulator.min.js, see THIRD-PARTY.txt): it sorts,
  // filters and pages. This is the glue: the form (and the links behind the numbers, which
  // set it through the URL's #fragment) becomes Tabulator's filters, and every cell is a
  // DOM node made here, so the library never parses a value as HTML.
  function textCell(cell) {
    var v = cell.getValue();
    return document.createTextNode(v === null || v === undefined ? "" : String(v));
  }
  function samplesPage() {
    var form = document.getElementById("filters");
    var count = document.getElementById("count");
    var rows = data.rows.map(function (r) {
      var robust = r.rs === null ? "" : r.rs + (r.rc ? ":" + r.rc : "");
      return {r: String(r.r), rn: data.runs[r.r], t: r.t, n: r.n, f: r.f, lv: r.l === null ? "?" : String(r.l),
              s: r.s, st: r.st, rb: robust, rbt: r.rs === null ? "" : r.rs + (r.rc ? " (" + r.rc + ")" : ""),
              cp: r.c ? "yes" : "no", tok: r.tok, sec: r.sec, d: r.d, u: r.u,
              hay: r.t + " " + r.n + " " + r.f + " " + r.st + " " + r.d};
    });
    function column(title, field, extra) {
      var c = {title: title, field: field, formatter: textCell, headerTooltip: false};
      Object.keys(extra || {}).forEach(function (k) { c[k] = extra[k]; });
      return c;
    }
    var table = new Tabulator("#sample-table", {
      // a page of 50 rows drawn as plain DOM (the rows wrap: their CSS lets cells grow) shows the
      // table of 1,500 samples ~3x sooner than the virtual renderer with variable-height columns
      data: rows, layout: "fitColumns", renderVertical: "basic", pagination: true, paginationSize: 50,
      paginationSizeSelector: [50, 100, 250, 500, true], paginationCounter: "rows",
      columns: [
        column("run", "rn", {minWidth: 80}),
        column("task", "t", {sorter: "alphanum", minWidth: 74, widthGrow: 0.3}),
        column("name", "n", {widthGrow: 2, minWidth: 100, cssClass: "wrap-cell", formatter: function (cell) {
          return link(cell.getRow().getData().u, cell.getValue());
        }}),
        column("family", "f", {minWidth: 100, cssClass: "wrap-cell"}),
        column("level", "lv", {minWidth: 74, widthGrow: 0.3}),
        column("sample", "s", {sorter: "number", minWidth: 92, widthGrow: 0.3, formatter: function (cell) {
          return link(cell.getRow().getData().u, "s" + cell.getValue());
        }}),
        column("status", "st", {minWidth: 120, formatter: function (cell) {
          return el("span", cell.getValue(), "status st-" + cell.getValue());
        }}),
        column("robust", "rbt", {minWidth: 92, cssClass: "wrap-cell"}),
        column("tokens", "tok", {sorter: "number", minWidth: 92, widthGrow: 0.3}),
        column("seconds", "sec", {sorter: "number", minWidth: 100, widthGrow: 0.3}),
        column("detail", "d", {widthGrow: 4, cssClass: "detail-cell wrap-cell"})
      ]
    });
    fillSelect(form.status, uniq(rows.map(function (r) { return r.st; })));
    fillSelect(form.family, uniq(rows.map(function (r) { return r.f; })));
    fillSelect(form.level, uniq(rows.map(function (r) { return r.lv; })));
    fillSelect(form.robust, uniq(rows.filter(function (r) { return r.rb; }).map(function (r) { return r.rb; })));

    // form field -> Tabulator filter on the row's field ("like": case-insensitive substring)
    var FILTERS = [["run", "r", "="], ["status", "st", "="], ["family", "f", "="], ["level", "lv", "="],
                   ["compiled", "cp", "="], ["robust", "rb", "="], ["task", "t", "="], ["q", "hay", "like"]];
    function apply() {
      var filters = [];
      FILTERS.forEach(function (f) {
        var value = form[f[0]].value.trim();
        if (value !== "") filters.push({field: f[1], type: f[2], value: value});
      });
      // a fresh table with an empty form needs no filtering (setFilter would redraw it for nothing)
      if (filters.length || table.getFilters().length) table.setFilter(filters);
      count.textContent = table.getDataCount("active") + " of " + rows.length + " samples";
    }
    function fromHash() {
      var p = hashParams();
      FILTERS.forEach(function (f) { form[f[0]].value = p[f[0]] || ""; });
      apply();
      if (Object.keys(p).length) document.getElementById("samples").scrollIntoView();
    }
    table.on("tableBuilt", function () {
      form.addEventListener("input", apply);
      form.addEventListener("change", apply);
      form.addEventListener("reset", function () { setTimeout(apply, 0); });
      window.addEventListener("hashchange", fromHash);
      fromHash();
    });
    form.addEventListener("submit", function (e) { e.preventDefault(); });
  }

  // compare.html: one row per task, one column per run (Tabulator too); the form picks the
  // pair A, B and narrows the rows to the tasks A passed and B failed, or to a search.
  function comparePage() {
    var form = document.getElementById("compare-filters");
    var counts = document.getElementById("pair-counts");
    var rows = data.tasks.map(function (task) {
      var row = {t: task.t, n: task.n, f: task.f, hay: task.t + " " + task.n + " " + task.f};
      data.runs.forEach(function (_, i) {
        var o = task.o[String(i)];
        row["r" + i] = o ? o[0] / o[1] : -1;          // the pass share sorts the run's column
        row["o" + i] = o || null;
      });
      return row;
    });
    function outcomeCell(i) {
      return function (cell) {
        var o = cell.getRow().getData()["o" + i];
        var span = el("span");
        if (!o) { span.textContent = "not evaluated"; return span; }
        span.appendChild(el("span", o[0] + "/" + o[1] + " ", o[0] > 0 ? "ok" : "ko"));
        o[2].forEach(function (s) {
          span.appendChild(link(s[2], "s" + s[0], "status st-" + s[1]));
          span.appendChild(document.createTextNode(" "));
        });
        return span;
      };
    }
    var only = {};
    var columns = [
      {title: "task", field: "t", sorter: "alphanum", formatter: textCell, minWidth: 74, widthGrow: 0.3},
      {title: "name", field: "n", formatter: textCell, widthGrow: 1.5},
      {title: "family", field: "f", formatter: textCell, widthGrow: 1}
    ].concat(data.runs.map(function (name, i) {
      return {title: name, field: "r" + i, sorter: "number", formatter: outcomeCell(i), widthGrow: 1,
              cssClass: "wrap-cell"};
    }));
    var table = new Tabulator("#compare-table", {
      data: rows, layout: "fitColumns", renderVertical: "basic", pagination: true, paginationSize: 50,
      paginationSizeSelector: [50, 100, 250, true], paginationCounter: "rows", columns: columns,
      rowFormatter: function (row) {
        row.getElement().classList.toggle("a-not-b", row.getData().t in only);
      }
    });
    function apply() {
      var a = form.a.value, b = form.b.value, q = form.q.value.trim().toLowerCase(), onlyPair = form.only.checked;
      var pair = a === b ? [] : data.pairs[a + "|" + b];
      only = {};
      pair.forEach(function (t) { only[t] = 1; });
      // one function filter: Tabulator's "in" would let every row through for an empty pair
      table.setFilter(function (d) {
        return (!onlyPair || d.t in only) && (!q || d.hay.toLowerCase().indexOf(q) >= 0);
      });
      table.redraw(true);                                 // the rows' "A passed, B failed" mark
      counts.textContent = (a === b ? "pick two different runs; " :
        pair.length + " task(s) " + data.runs[a] + " passed and " + data.runs[b] + " failed; ") +
        table.getDataCount("active") + " of " + data.tasks.length + " tasks shown";
    }
    table.on("tableBuilt", function () {
      form.addEventListener("input", apply);
      form.addEventListener("change", apply);
      apply();
    });
    form.addEventListener("submit", function (e) { e.preventDefault(); });
  }

  if (document.getElementById("sample-table")) samplesPage();
  if (document.getElementById("compare-table")) comparePage();
})();
