"use strict";
// The deplodock pipeline explorer. Reads the exploration (JSON, in the page) and renders four
// tabs. Every piece of IR or C is inserted with textContent, never as markup. The location's
// hash is the state, so a link can open a view:
//   #overview | #stages/<stage>[/@<symbol>] | #passes | #kernels/<kernel>/<level>

const DATA = JSON.parse(document.getElementById("exploration").textContent);
const TABS = [["overview", "Overview"], ["stages", "Stages"], ["passes", "Passes"], ["kernels", "Kernels"]];
const STAGE_NAMES = DATA.stages.map((s) => s.name);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

function fmt(value, digits) {
  if (value === null || value === undefined) return "–";
  if (typeof value === "number") return digits === undefined ? value.toLocaleString("en-US") : value.toFixed(digits);
  return String(value);
}

// A block of code with line numbers; `classify(line)` may give each line a class, `mark`
// (a string) highlights the first line that contains it and returns that line's element.
function codeBlock(text, classify, mark) {
  const pre = el("pre", { class: "code" });
  const lines = text.replace(/\n$/, "").split("\n");
  let marked = null;
  lines.forEach((line, i) => {
    const span = el("span", { class: "ln", "data-n": String(i + 1) }, line + "\n");
    const extra = classify ? classify(line) : "";
    if (extra) span.classList.add(extra);
    if (mark && !marked && line.includes(mark)) {
      span.classList.add("mark");
      marked = span;
    }
    pre.append(span);
  });
  pre.marked = marked;
  return pre;
}

function diffClass(line) {
  if (line.startsWith("@@")) return "hunk";
  if (line.startsWith("+")) return "add";
  if (line.startsWith("-")) return "del";
  return "";
}

function table(headers, rows) {
  const head = el("tr", {}, ...headers.map((h) => el("th", { text: h })));
  const body = rows.map((cells) => el("tr", {}, ...cells.map((c) => el("td", {}, c instanceof Node ? c : fmt(c)))));
  return el("table", {}, el("thead", {}, head), el("tbody", {}, ...body));
}

function link(hash, text) {
  return el("a", { href: "#" + hash, text: text });
}

// ---- Overview ------------------------------------------------------------------------------

function renderOverview(panel) {
  panel.replaceChildren(
    el("h2", { text: "Source" }),
    codeBlock(DATA.source),
    el("p", { class: "note", text: Object.entries(DATA.versions).map(([k, v]) => `${k} ${v}`).join(" · ") }),
    el("h2", { text: "Stages" }),
    table(
      ["stage", "lines", "passes that changed it", "lowering ms"],
      DATA.stages.map((s) => [
        link("stages/" + s.name, s.name),
        s.text.split("\n").length,
        DATA.passes.filter((p) => p.stage === s.name).length,
        s.seconds ? fmt(s.seconds * 1000, 1) : "–",
      ]),
    ),
    el("h2", { text: "Kernels" }),
    kernelTable(),
    ...DATA.notes.map((n) => el("p", { class: n.includes("MODELED") ? "note modeled" : "note", text: n })),
  );
}

function kernelTable() {
  if (!DATA.kernels.length) return el("p", { class: "empty", text: "No kernels: the program launches none (or was not lowered to CUDA)." });
  const rows = DATA.kernels.map((k) => {
    const m = k.model || {};
    const p = k.ptxas || {};
    return [
      link("kernels/" + k.name + "/cuda", k.name),
      k.launches,
      k.grid,
      k.block,
      k.ptxas ? p.registers : "–",
      k.ptxas ? p.shared_bytes : "–",
      k.ptxas ? (p.spill_stores || p.spill_loads ? `${p.spill_stores}/${p.spill_loads} B` : "none") : "–",
      k.model ? fmt(m.modeled_us, 2) : "–",
      k.model ? m.limiter : "–",
      k.model ? fmt(m.sol_pct, 1) : "–",
    ];
  });
  return table(
    ["kernel", "launches", "grid", "block", "registers", "static smem B", "spills (st/ld)", "modeled µs", "limiter", "%SOL (modeled)"],
    rows,
  );
}

// ---- Stages: each stage beside the one before ----------------------------------------------

const stageView = { left: null, right: null };

function stagePane(side, mark) {
  const select = el("select", { "aria-label": side + " stage" });
  for (const name of STAGE_NAMES) select.append(el("option", { value: name, text: name }));
  select.value = stageView[side];
  select.addEventListener("change", () => {
    stageView[side] = select.value;
    renderStages(document.getElementById("tab-stages"));
  });
  const stage = DATA.stages.find((s) => s.name === stageView[side]);
  const code = codeBlock(stage.text, null, side === "right" ? mark : null);
  return [el("div", { class: "pane" }, el("div", { class: "pane-head" }, el("strong", { text: side === "left" ? "before" : "after" }), select), code), code];
}

function renderStages(panel, stage, symbol) {
  if (stage) {
    const i = Math.max(STAGE_NAMES.indexOf(stage), 0);
    stageView.right = STAGE_NAMES[i];
    stageView.left = STAGE_NAMES[Math.max(i - 1, 0)];
  }
  if (!stageView.right) {
    stageView.right = STAGE_NAMES[Math.min(1, STAGE_NAMES.length - 1)];
    stageView.left = STAGE_NAMES[0];
  }
  const pipeline = el("div", { class: "pipeline" });
  STAGE_NAMES.forEach((name, i) => {
    if (i) pipeline.append(el("span", { class: "arrow", text: "→" }));
    pipeline.append(el("button", { class: name === stageView.right ? "on" : "", text: name, onclick: () => { location.hash = "stages/" + name; } }));
  });
  const mark = symbol ? (stageView.right === "cuda" ? " " + symbol.slice(1) + "(" : symbol + "(") : null;
  const [left] = stagePane("left", null);
  const [right, rightCode] = stagePane("right", mark);
  panel.replaceChildren(pipeline, el("div", { class: "split" }, left, right));
  if (rightCode.marked) rightCode.marked.scrollIntoView({ block: "center", inline: "nearest" });
}

// ---- Passes: the diff of every pass that changed the module ---------------------------------

function renderPasses(panel) {
  const input = el("input", { type: "search", placeholder: "filter passes (name or text)", "aria-label": "filter passes" });
  const count = el("span", { class: "note" });
  const list = el("div");
  const groups = STAGE_NAMES.map((stage) => {
    const passes = DATA.passes.filter((p) => p.stage === stage);
    const items = passes.map((p) => {
      const lines = p.diff.split("\n");
      const added = lines.filter((l) => l.startsWith("+")).length;
      const removed = lines.filter((l) => l.startsWith("-")).length;
      const details = el("details", { class: "pass" }, el("summary", {}, p.spec, el("span", { class: "stat", text: `+${added} −${removed}` })));
      details.addEventListener("toggle", () => {
        if (details.open && details.childElementCount === 1) details.append(codeBlock(p.diff, diffClass));
      }, { once: false });
      details.pass = p;
      return details;
    });
    return { stage, heading: el("h2", { text: `${stage} (${passes.length})` }), items };
  }).filter((g) => g.items.length);
  function apply() {
    const needle = input.value.toLowerCase();
    let shown = 0;
    for (const group of groups) {
      let any = false;
      for (const item of group.items) {
        const hit = !needle || item.pass.spec.toLowerCase().includes(needle) || item.pass.diff.toLowerCase().includes(needle);
        item.hidden = !hit;
        any = any || hit;
        if (hit) shown += 1;
      }
      group.heading.hidden = !any;
    }
    count.textContent = `${shown} of ${DATA.passes.length} passes changed the module`;
  }
  input.addEventListener("input", apply);
  for (const group of groups) list.append(group.heading, ...group.items);
  if (!groups.length) list.append(el("p", { class: "empty", text: "No pass changed the module." }));
  panel.replaceChildren(el("div", { class: "filter" }, input, count), list);
  apply();
}

// ---- Kernels: one kernel from its loop nest to CUDA ---------------------------------------

function renderKernels(panel, name, level) {
  if (!DATA.kernels.length) {
    panel.replaceChildren(el("p", { class: "empty", text: "No kernels: the program launches none (or was not lowered to CUDA)." }));
    return;
  }
  const kernel = DATA.kernels.find((k) => k.name === name) || DATA.kernels[0];
  const levels = [...Object.keys(kernel.levels), "cuda"];
  const shown = levels.includes(level) ? level : "cuda";
  const list = el("ul", {}, ...DATA.kernels.map((k) => el("li", {}, el("a", { href: `#kernels/${k.name}/${shown}`, class: k === kernel ? "on" : "", text: k.name }))));
  const pills = el("div", { class: "pills", role: "tablist" }, ...levels.map((l) => el("button", { class: l === shown ? "on" : "", text: l === "loop" ? "loop nest" : l, onclick: () => { location.hash = `kernels/${kernel.name}/${l}`; } })));
  const text = shown === "cuda" ? kernel.cuda : kernel.levels[shown];
  const back = kernel.levels.loop ? el("p", {}, link(`stages/loop/@${kernel.name}`, "open its loop nest in the loop-level program ↗")) : null;
  panel.replaceChildren(
    el("div", { class: "kernels" },
      el("div", {}, el("h2", { text: `Kernels (${DATA.kernels.length})` }), list),
      el("div", {},
        el("h2", { text: "@" + kernel.name }),
        el("div", { class: "facts" }, launchFacts(kernel), ptxasFacts(kernel), modelFacts(kernel)),
        back,
        pills,
        codeBlock(text),
      ),
    ),
  );
}

function facts(title, rows) {
  return table([title, ""], rows);
}

function launchFacts(k) {
  return facts("launch", [["grid", k.grid], ["block", k.block], ["launches", k.launches]]);
}

function ptxasFacts(k) {
  if (!k.ptxas) return el("p", { class: "empty", text: "ptxas: not available (no nvcc)" });
  const p = k.ptxas;
  return facts("ptxas", [["registers", p.registers], ["static shared B", p.shared_bytes], ["spill stores B", p.spill_stores], ["spill loads B", p.spill_loads], ["stack frame B", p.stack_frame]]);
}

function modelFacts(k) {
  if (!k.model) return el("p", { class: "empty", text: "not modeled" });
  const m = k.model;
  const main = facts("modeled (not measured)", [
    ["time µs", fmt(m.modeled_us, 3)],
    ["busy µs", fmt(m.busy_us, 3)],
    ["limiter", m.limiter],
    ["%SOL (launch included)", fmt(m.sol_pct, 1)],
    ["%SOL of busy time", fmt(m.busy_sol_pct, 1)],
    ["occupancy %", fmt(m.occupancy_pct, 1)],
    ["waves", fmt(m.waves, 2)],
    ["DRAM bytes", fmt(m.dram_bytes)],
    ["sectors / load", fmt(m.sectors_per_load_request, 2)],
    ["bank conflicts ×", fmt(m.bank_conflict_factor, 2)],
  ]);
  const terms = facts("modeled terms µs (largest = limiter)", Object.entries(m.terms_us || {}).map(([name, us]) => [name, fmt(us, 3)]));
  return el("div", { class: "facts" }, main, terms);
}

// ---- Tabs and the hash ------------------------------------------------------------------------

function route() {
  const parts = decodeURIComponent(location.hash.replace(/^#/, "")).split("/");
  const tab = TABS.some(([id]) => id === parts[0]) ? parts[0] : "overview";
  for (const [id] of TABS) {
    document.getElementById("tab-" + id).hidden = id !== tab;
    document.getElementById("tabbutton-" + id).setAttribute("aria-selected", String(id === tab));
  }
  const panel = document.getElementById("tab-" + tab);
  if (tab === "overview") renderOverview(panel);
  else if (tab === "stages") renderStages(panel, parts[1], parts[2]);
  else if (tab === "passes") renderPasses(panel);
  else renderKernels(panel, parts[1], parts[2]);
}

document.getElementById("title").textContent = DATA.title;
const nav = document.getElementById("tabs");
for (const [id, label] of TABS) {
  nav.append(el("button", { id: "tabbutton-" + id, role: "tab", "aria-controls": "tab-" + id, text: label, onclick: () => { location.hash = id; } }));
}
window.addEventListener("hashchange", route);
route();
