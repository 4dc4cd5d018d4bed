// mosaic-bench run viewer: renders the JSON embedded in this page (eval/view/page.py). Every text from a run
// (questions, answers, memories, judge reasons) goes into the page through textContent, never as markup.
// The view and its filters live in the URL's #fragment, so a filtered view can be linked and reloaded.
"use strict";

const DATA = JSON.parse(document.getElementById("view-data").textContent);
const runCache = {};

function run(i) {
  if (!(i in runCache)) {
    const node = document.getElementById("run-" + i);
    runCache[i] = node ? JSON.parse(node.textContent) : null;
  }
  return runCache[i];
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "onclick" || k === "oninput" || k === "onchange") node[k] = v;
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function params() {
  const out = {};
  for (const part of location.hash.replace(/^#/, "").split("&")) {
    if (!part) continue;
    const [k, ...rest] = part.split("=");
    out[decodeURIComponent(k)] = decodeURIComponent(rest.join("="));
  }
  return out;
}

function setParams(update, push) {
  const p = Object.assign(params(), update);
  const hash = "#" + Object.entries(p).filter(([, v]) => v !== "" && v !== null && v !== undefined)
    .map(([k, v]) => encodeURIComponent(k) + "=" + encodeURIComponent(v)).join("&");
  if (push) location.hash = hash;
  else history.replaceState(null, "", hash);
}

function pct(x) {
  return x === null || x === undefined ? "" : (x * 100).toFixed(1);
}

function cell(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "boolean") return value ? "yes" : "no";
  if (typeof value === "object") return JSON.stringify(value);
  return String(value);
}

function stateBadge(state, label) {
  return el("span", { class: "badge " + state }, label);
}

// ---- pieces ------------------------------------------------------------------------------------------
function kvTable(obj) {
  const rows = Object.entries(obj || {}).filter(([, v]) => v !== null && v !== undefined && v !== "");
  if (!rows.length) return el("p", { class: "muted" }, "none recorded");
  return el("table", { class: "kv" }, ...rows.map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, cell(v)))));
}

function banner(kind, title, lines) {
  if (!lines || !lines.length) return null;
  return el("div", { class: "banner " + kind }, el("strong", {}, title), el("ul", {}, ...lines.map((l) => el("li", {}, l))));
}

function chart(groups) {
  if (!groups.length) return el("p", { class: "muted" }, "no metrics with confidence intervals (metrics.json missing or without CIs)");
  const box = el("div", { class: "chart" });
  for (const g of groups) {
    box.append(el("div", { class: "chart-label" }, g.label));
    for (const b of g.bars) {
      const track = el("div", { class: "track" });
      track.append(el("div", { class: "fill", style: `width:${Math.max(0, Math.min(1, b.mean)) * 100}%` }));
      if (b.lo !== null && b.lo !== undefined && b.hi !== null && b.hi !== undefined) {
        const lo = Math.max(0, Math.min(1, b.lo)), hi = Math.max(0, Math.min(1, b.hi));
        track.append(el("div", { class: "ci", style: `left:${lo * 100}%;width:${(hi - lo) * 100}%` }));
      }
      const ci = b.lo !== null && b.lo !== undefined ? ` [${pct(b.lo)}, ${pct(b.hi)}]` : "";
      box.append(el("div", { class: "bar" }, el("span", { class: "bar-name" }, b.name), track, el("span", { class: "bar-value" }, pct(b.mean) + ci)));
    }
  }
  return box;
}

function section(s) {
  const box = el("div", { class: "section" }, el("h4", {}, s.title));
  if (s.rows) {
    if (!s.rows.length) box.append(el("p", { class: "muted" }, "none"));
    else {
      const t = el("table", { class: "inner" });
      if (s.head) t.append(el("tr", {}, ...s.head.map((h) => el("th", {}, h))));
      s.rows.forEach((r, i) => t.append(el("tr", { class: s.mark && s.mark[i] ? "cites-gold" : null },
        ...r.map((v) => el("td", {}, cell(v))))));
      box.append(t);
      if (s.mark && s.mark.some(Boolean)) box.append(el("p", { class: "muted small" }, "highlighted: cites a gold evidence turn"));
    }
  } else {
    box.append(el("pre", { class: "text" }, cell(s.text)));
  }
  return box;
}

// ---- a filterable, sortable item table ---------------------------------------------------------------
// spec: {head, items: [{key, group, state, label, cols, search}], extraFilter?: (item) => bool, detail(item) -> Node}
function itemTable(spec, prefix) {
  const p = params();
  const groups = [...new Set(spec.items.map((it) => it.group))].sort();
  const groupSel = el("select", { id: prefix + "group" }, el("option", { value: "" }, `every ${spec.groupName || "group"}`),
    ...groups.map((g) => el("option", { value: g }, g)));
  const stateSel = el("select", { id: prefix + "state" }, el("option", { value: "" }, "every verdict"),
    el("option", { value: "right" }, "right"), el("option", { value: "wrong" }, "wrong"), el("option", { value: "unjudged" }, "not judged"));
  const text = el("input", { id: prefix + "q", type: "search", placeholder: "filter text…" });
  const count = el("span", { class: "count", id: prefix + "count" });
  groupSel.value = p[prefix + "group"] || "";
  stateSel.value = p[prefix + "state"] || "";
  text.value = p[prefix + "q"] || "";
  const controls = el("div", { class: "controls" }, groupSel, spec.noState ? null : stateSel, text, ...(spec.extraControls || []), count);

  const table = el("table", { class: "items", id: prefix + "table" });
  const headRow = el("tr", {});
  const tbody = el("tbody", {});
  let sortCol = p[prefix + "sort"] !== undefined ? Number(p[prefix + "sort"]) : -1;
  let sortDir = p[prefix + "dir"] === "desc" ? -1 : 1;
  spec.head.forEach((h, i) => headRow.append(el("th", { class: "sortable", onclick: () => {
    sortDir = sortCol === i ? -sortDir : 1;
    sortCol = i;
    setParams({ [prefix + "sort"]: i, [prefix + "dir"]: sortDir < 0 ? "desc" : "" });
    sortRows();
  } }, h)));
  table.append(el("thead", {}, headRow), tbody);

  const rows = spec.items.map((it) => {
    it.open = null; // a row object outlives a re-render (the run's data is parsed once): its detail row does not
    it.search = (it.search || it.cols.map(cell).join(" ")).toLowerCase();
    const tr = el("tr", { class: "item", "data-key": it.key, "data-state": it.state, "data-group": it.group });
    it.cols.forEach((v, i) => tr.append(el("td", {}, spec.renderCell ? spec.renderCell(it, i, v) : cell(v))));
    tr.onclick = () => toggle(it, tr);
    it.tr = tr;
    tbody.append(tr);
    return it;
  });

  function toggle(it, tr) {
    if (it.open) {
      it.open.remove();
      it.open = null;
      setParams({ [prefix + "open"]: "" });
      return;
    }
    it.open = el("tr", { class: "detail", "data-detail-of": it.key }, el("td", { colspan: spec.head.length }, spec.detail(it)));
    it.open.hidden = tr.hidden;
    tr.after(it.open);
    setParams({ [prefix + "open"]: it.key });
  }

  function sortRows() {
    if (sortCol < 0) return;
    const num = rows.every((r) => r.cols[sortCol] === null || r.cols[sortCol] === "" || !isNaN(Number(r.cols[sortCol])));
    const sorted = [...rows].sort((a, b) => {
      const x = a.cols[sortCol], y = b.cols[sortCol];
      const c = num ? Number(x) - Number(y) : cell(x).localeCompare(cell(y));
      return c * sortDir;
    });
    for (const r of sorted) {
      tbody.append(r.tr);
      if (r.open) tbody.append(r.open);
    }
  }

  function apply() {
    const g = groupSel.value, s = stateSel.value, q = text.value.trim().toLowerCase();
    let shown = 0;
    for (const r of rows) {
      const ok = (!g || r.group === g) && (!s || r.state === s) && (!q || r.search.includes(q)) && (!spec.extraFilter || spec.extraFilter(r));
      r.tr.hidden = !ok;
      if (r.open) r.open.hidden = !ok;
      if (ok) shown++;
    }
    count.textContent = `${shown} of ${rows.length} shown`;
    count.setAttribute("data-shown", shown);
  }

  const onFilter = () => {
    setParams({ [prefix + "group"]: groupSel.value, [prefix + "state"]: stateSel.value, [prefix + "q"]: text.value });
    apply();
  };
  groupSel.onchange = onFilter;
  stateSel.onchange = onFilter;
  text.oninput = onFilter;
  spec.refilter = apply;
  sortRows();
  apply();
  const wanted = p[prefix + "open"];
  if (wanted) {
    const it = rows.find((r) => r.key === wanted);
    if (it) toggle(it, it.tr);
  }
  return el("div", {}, controls, el("div", { class: "scroll" }, table));
}

// ---- pages -------------------------------------------------------------------------------------------
function nav(items) {
  return el("nav", {}, ...items.map(([label, href, active]) => el("a", { href, class: active ? "active" : null }, label)));
}

function runTitle(r) {
  return `${r.benchmark} / ${r.system} / ${r.ablation} / ${r.hash}`;
}

function indexPage() {
  const box = el("div", {});
  box.append(el("h1", {}, "Runs"), el("p", { class: "muted" }, `${DATA.index.length} run folders under ${DATA.roots.join(" and ")}; click one to open its page.`));
  const items = DATA.index.map((r, i) => ({
    key: r.path, group: r.benchmark, state: r.finished ? "right" : "wrong", label: r.finished ? "finished" : "not finished",
    cols: [r.benchmark, r.system, r.ablation, r.hash, r.published ? "published" : "local", r.finished ? "finished" : "not finished", r.n,
      r.headline ? `${r.headline_name} ${pct(r.headline.mean)} [${pct(r.headline.lo)}, ${pct(r.headline.hi)}]` : "",
      r.code_sha ? String(r.code_sha).slice(0, 10) + (r.git_dirty ? " (dirty)" : "") : "", r.date ? String(r.date).slice(0, 19) : ""],
    run: i,
  }));
  box.append(itemTable({
    head: ["benchmark", "system", "ablation", "hash", "where", "finished", "n", "headline [95% CI]", "code sha", "finished at"],
    items, groupName: "benchmark", noState: true,
    renderCell: (it, i, v) => i === 3 ? el("a", { href: `#run=${it.run}`, onclick: (e) => e.stopPropagation() }, cell(v)) : cell(v),
    detail: (it) => el("p", {}, el("a", { href: `#run=${it.run}` }, "open " + it.key)),
  }, "i"));
  return box;
}

function runPage(i, view) {
  const r = run(i);
  if (!r) return el("p", {}, "no such run on this page");
  const box = el("div", {});
  const links = [];
  if (DATA.mode === "index") links.push(["← all runs", "#", false]);
  if (DATA.compare) links.push(["comparison", "#compare", false]);
  links.push(["run", `#run=${i}`, view !== "memory"]);
  if (r.stores.length) links.push([`memory (${r.stores.length})`, `#run=${i}&view=memory`, view === "memory"]);
  box.append(nav(links));
  box.append(el("h1", {}, runTitle(r)), el("p", { class: "path" }, r.path, " ",
    el("span", { class: "badge " + (r.finished ? "right" : "wrong") }, r.finished ? "finished" : "not finished"),
    r.published ? el("span", { class: "badge neutral" }, "published") : null));
  for (const b of [banner("warn", "Missing from this run folder", r.missing), banner("warn", "Damaged lines (skipped)", r.damaged),
    banner("note", "Notes", r.notes)]) if (b) box.append(b);
  if (view === "memory") {
    box.append(memoryView(r));
    return box;
  }
  const h = r.header;
  box.append(el("div", { class: "grid" },
    el("div", {}, el("h3", {}, "Models"), kvTable(h.models)),
    el("div", {}, el("h3", {}, "Code and inputs"), kvTable(Object.assign({ "code sha": h.code.git_sha, "code sha at start": h.code.git_sha_start,
      "dirty": h.code.dirty, "code changed during run": h.code.changed_during_run, "finished at": h.finished_at }, h.input_files))),
    el("div", {}, el("h3", {}, "Calls, tokens, seconds"), kvTable(h.usage),
      el("details", {}, el("summary", {}, "by purpose"), kvTable(Object.fromEntries(Object.entries(h.by_purpose).map(([k, v]) =>
        [k, `${v.calls} calls, ${v.prompt_tokens} + ${v.completion_tokens} tokens`])))))));
  box.append(el("details", {}, el("summary", {}, "config.yaml and command-line overrides"),
    el("pre", { class: "text" }, "overrides: " + JSON.stringify(h.overrides) + "\n\n" + h.config_yaml)));
  box.append(el("h2", {}, "Metrics (x100, 95% bootstrap CI)"), chart(r.chart));
  if (!r.tables.length) {
    box.append(el("p", { class: "muted" }, "no item rows to show (see what is missing above)"));
    return box;
  }
  const p = params();
  const current = r.tables.find((t) => t.id === p.table) || r.tables[0];
  if (r.tables.length > 1) box.append(nav(r.tables.map((t) => [`${t.title} (${t.items.length})`, `#run=${i}&table=${t.id}`, t === current])));
  box.append(el("h2", {}, `${current.title} (${current.items.length})`));
  const verdictCol = current.head.findIndex((h) => h === "verdict" || h === "outcome");
  box.append(itemTable({ head: current.head, items: current.items, groupName: current.group_name,
    renderCell: (it, c, v) => (c === verdictCol ? stateBadge(it.state, cell(v)) : cell(v)),
    detail: (it) => el("div", { class: "details" }, ...it.detail.map(section)) }, ""));
  return box;
}

function memoryView(r) {
  const box = el("div", {}, el("h2", {}, "What the system stored"));
  r.stores.forEach((s, n) => {
    const statuses = [...new Set(s.rows.map((row) => String(row[s.status_col])))].sort();
    box.append(el("h3", {}, `${s.name} (${s.rows.length} entries; ${statuses.map((st) => `${st} ${s.rows.filter((row) => String(row[s.status_col]) === st).length}`).join(", ")})`));
    const items = s.rows.map((row, k) => ({ key: String(row[0] ?? k), group: String(row[s.status_col]), state: "neutral", label: "", cols: row }));
    box.append(itemTable({ head: s.head, items, groupName: "status", noState: true, detail: (it) => el("div", { class: "details" },
      ...s.head.map((hd, c) => section({ title: hd, text: cell(it.cols[c]) }))) }, `m${n}`));
  });
  return box;
}

function comparePage() {
  const c = DATA.compare;
  const runs = c.runs.map(run);
  const box = el("div", {});
  box.append(nav([["comparison", "#compare", true], ...runs.map((r, k) => [`run ${String.fromCharCode(65 + k)}: ${r.system}/${r.ablation}`, `#run=${c.runs[k]}`, false])]));
  box.append(el("h1", {}, `Comparison: ${c.benchmark}, ${runs.length} runs`));
  box.append(el("ul", {}, ...runs.map((r, k) => el("li", {}, el("strong", {}, String.fromCharCode(65 + k) + ": "), r.path))));
  box.append(el("h2", {}, "Paired difference against A (as scripts.compare_runs prints it)"), el("p", { class: "path" }, c.command));
  for (const block of c.printed) {
    if (!block.head) {
      box.append(el("p", { class: "muted" }, block.text));
      continue;
    }
    const t = el("table", { class: "inner" }, el("tr", {}, ...block.head.map((h) => el("th", {}, h))));
    for (const row of block.rows) t.append(el("tr", {}, ...row.map((v) => el("td", {}, v))));
    box.append(el("div", { class: "scroll" }, t));
  }
  if (c.per_category && c.per_category.rows.length) {
    const pc = el("table", { class: "inner" }, el("tr", {}, ...c.per_category.head.map((h) => el("th", {}, h))));
    for (const row of c.per_category.rows) pc.append(el("tr", {}, ...row.map((v) => el("td", {}, v))));
    box.append(el("h3", {}, "Judge accuracy per category: OTHER - A, paired 95% CI"), pc);
  }
  // one row per item key, verdict columns per run
  const tableId = c.table_id;
  const tables = runs.map((r) => (r.tables.find((tb) => tb.id === tableId) || { items: [] }));
  const byKey = tables.map((tb) => Object.fromEntries(tb.items.map((it) => [it.key, it])));
  const keys = [];
  const seen = new Set();
  for (const tb of tables) for (const it of tb.items) if (!seen.has(it.key)) { seen.add(it.key); keys.push(it.key); }
  const letters = runs.map((_, k) => String.fromCharCode(65 + k));
  const items = keys.map((key) => {
    const first = byKey.find((m) => m[key])[key];
    const states = byKey.map((m) => (m[key] ? m[key].state : "absent"));
    return { key, group: first.group, state: states.every((s) => s === states[0]) ? "right" : "wrong", states,
      cols: [key, first.group, first.cols[2], ...byKey.map((m) => (m[key] ? m[key].label : "absent"))],
      search: [key, first.group, ...byKey.map((m) => (m[key] ? m[key].cols.map(cell).join(" ") : ""))].join(" ") };
  });
  const pairs = [];
  letters.forEach((a, i) => letters.forEach((b, j) => { if (i !== j) pairs.push([i, j, `right in ${a}, wrong in ${b}`]); }));
  const p = params();
  const pairSel = el("select", { id: "cpair" }, el("option", { value: "" }, "every question"), el("option", { value: "differ" }, "verdicts differ"),
    ...pairs.map(([i, j, label]) => el("option", { value: `${i}-${j}` }, label)));
  pairSel.value = p.cpair || "";
  const spec = {
    head: ["key", tables[0].group_name || "group", "item", ...letters.map((l, k) => `${l}: ${runs[k].system}/${runs[k].ablation}`)],
    items, groupName: tables[0].group_name, extraControls: [pairSel], noState: true,
    renderCell: (it, i, v) => (i >= 3 ? stateBadge(it.states[i - 3], cell(v)) : cell(v)),
    extraFilter: (it) => {
      const v = pairSel.value;
      if (!v) return true;
      if (v === "differ") return new Set(it.states).size > 1;
      const [i, j] = v.split("-").map(Number);
      return it.states[i] === "right" && it.states[j] === "wrong";
    },
    detail: (it) => el("div", { class: "side-by-side" }, ...byKey.map((m, k) => el("div", { class: "details" },
      el("h3", {}, `${letters[k]}: ${runs[k].system}/${runs[k].ablation}`), ...(m[it.key] ? m[it.key].detail.map(section) : [el("p", {}, "absent from this run")])))),
  };
  // the state filter of the shared table means "verdicts agree/differ"; the pair filter is the one that matters
  box.append(el("h2", {}, `Items side by side (${items.length})`));
  const view = itemTable(spec, "c");
  pairSel.onchange = () => { setParams({ cpair: pairSel.value }); spec.refilter(); };
  box.append(view);
  return box;
}

function render() {
  const p = params();
  const root = document.getElementById("app");
  root.textContent = "";
  let page;
  if (p.run !== undefined) page = runPage(Number(p.run), p.view);
  else if (p.compare !== undefined || (DATA.mode === "compare" && !p.run)) page = comparePage();
  else if (DATA.mode === "index") page = indexPage();
  else page = runPage(0, p.view);
  root.append(page);
  document.title = DATA.title;
  document.documentElement.setAttribute("data-rendered-ms", performance.now().toFixed(1));
}

window.addEventListener("hashchange", render);
render();
