// cuset view: filters, search and paging of the sample table (index.html) and the
// per-task comparison (compare.html). Data comes from the JSON element #viewer-data;
// every value reaches the page through textContent or a link built from our own paths,
// never through innerHTML.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("viewer-data").textContent);
  var PAGE = 300;

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

  function samplesPage() {
    var form = document.getElementById("filters");
    var body = document.querySelector("#sample-table tbody");
    var count = document.getElementById("count");
    var more = document.getElementById("more");
    var rows = data.rows, shown = PAGE, matches = [];
    fillSelect(form.status, uniq(rows.map(function (r) { return r.st; })));
    fillSelect(form.family, uniq(rows.map(function (r) { return r.f; })));
    fillSelect(form.level, uniq(rows.map(function (r) { return r.l === null ? "?" : String(r.l); })));
    fillSelect(form.robust, uniq(rows.filter(function (r) { return r.rs !== null; })
      .map(function (r) { return r.rs + (r.rc ? ":" + r.rc : ""); })));

    function matchesFilter(r, f) {
      if (f.run !== "" && String(r.r) !== f.run) return false;
      if (f.status && r.st !== f.status) return false;
      if (f.family && r.f !== f.family) return false;
      if (f.level && (r.l === null ? "?" : String(r.l)) !== f.level) return false;
      if (f.compiled && (r.c ? "yes" : "no") !== f.compiled) return false;
      if (f.robust && (r.rs + (r.rc ? ":" + r.rc : "")) !== f.robust) return false;
      if (f.task && r.t !== f.task) return false;
      if (f.q) {
        var hay = (r.t + " " + r.n + " " + r.f + " " + r.st + " " + r.d).toLowerCase();
        if (hay.indexOf(f.q) < 0) return false;
      }
      return true;
    }
    function current() {
      return {run: form.run.value, status: form.status.value, family: form.family.value, level: form.level.value,
              compiled: form.compiled.value, robust: form.robust.value, task: form.task.value.trim(),
              q: form.q.value.trim().toLowerCase()};
    }
    function render() {
      body.textContent = "";
      matches.slice(0, shown).forEach(function (r) {
        var tr = document.createElement("tr");
        tr.appendChild(el("td", data.runs[r.r]));
        tr.appendChild(el("td", r.t));
        var name = el("td");
        name.appendChild(link(r.u, r.n));
        tr.appendChild(name);
        tr.appendChild(el("td", r.f));
        tr.appendChild(el("td", r.l === null ? "?" : r.l));
        var s = el("td");
        s.appendChild(link(r.u, "s" + r.s));
        tr.appendChild(s);
        var st = el("td");
        st.appendChild(el("span", r.st, "status st-" + r.st));
        tr.appendChild(st);
        tr.appendChild(el("td", r.rs === null ? "" : r.rs + (r.rc ? " (" + r.rc + ")" : "")));
        tr.appendChild(el("td", r.tok));
        tr.appendChild(el("td", r.sec));
        tr.appendChild(el("td", r.d, "detail-cell"));
        body.appendChild(tr);
      });
      count.textContent = matches.length + " of " + rows.length + " samples" +
        (matches.length > shown ? " (first " + shown + " shown)" : "");
      more.hidden = matches.length <= shown;
    }
    function apply() {
      var f = current();
      matches = rows.filter(function (r) { return matchesFilter(r, f); });
      shown = PAGE;
      render();
    }
    function fromHash() {
      var p = hashParams();
      ["run", "status", "family", "level", "compiled", "robust", "task", "q"].forEach(function (k) {
        form[k].value = p[k] || "";
      });
      apply();
      if (Object.keys(p).length) document.getElementById("samples").scrollIntoView();
    }
    form.addEventListener("input", apply);
    form.addEventListener("change", apply);
    form.addEventListener("reset", function () { setTimeout(apply, 0); });
    form.addEventListener("submit", function (e) { e.preventDefault(); });
    more.addEventListener("click", function () { shown += PAGE; render(); });
    window.addEventListener("hashchange", fromHash);
    fromHash();
  }

  function comparePage() {
    var form = document.getElementById("compare-filters");
    var body = document.querySelector("#compare-table tbody");
    var counts = document.getElementById("pair-counts");
    function apply() {
      var a = form.a.value, b = form.b.value, q = form.q.value.trim().toLowerCase();
      var pair = a === b ? [] : data.pairs[a + "|" + b];
      var only = {};
      pair.forEach(function (t) { only[t] = 1; });
      body.textContent = "";
      var n = 0;
      data.tasks.forEach(function (task) {
        if (form.only.checked && !(task.t in only)) return;
        if (q && (task.t + " " + task.n + " " + task.f).toLowerCase().indexOf(q) < 0) return;
        n += 1;
        var tr = document.createElement("tr");
        if (task.t in only) tr.className = "a-not-b";
        tr.appendChild(el("td", task.t));
        tr.appendChild(el("td", task.n));
        tr.appendChild(el("td", task.f));
        data.runs.forEach(function (_, i) {
          var td = el("td");
          var o = task.o[String(i)];
          if (!o) { td.textContent = "not evaluated"; tr.appendChild(td); return; }
          td.appendChild(el("span", o[0] + "/" + o[1] + " ", o[0] > 0 ? "ok" : "ko"));
          o[2].forEach(function (s) {
            td.appendChild(link(s[2], "s" + s[0], "status st-" + s[1]));
            td.appendChild(document.createTextNode(" "));
          });
          tr.appendChild(td);
        });
        body.appendChild(tr);
      });
      counts.textContent = (a === b ? "pick two different runs; " :
        pair.length + " task(s) " + data.runs[a] + " passed and " + data.runs[b] + " failed; ") +
        n + " of " + data.tasks.length + " tasks shown";
    }
    form.addEventListener("input", apply);
    form.addEventListener("change", apply);
    apply();
  }

  if (document.getElementById("sample-table")) samplesPage();
  if (document.getElementById("compare-table")) comparePage();
})();
