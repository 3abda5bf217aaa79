// Plugin console: the node's plugins (components and MCP servers) with state
// badges and toggles, a grant editor (requested vs granted side by side),
// reload, install by upload and MCP servers by form, both with a review step,
// uninstall, and the recent changes. Needs approve scope and the
// admin.plugins permission; the server checks both on every call.
"use strict";

const consoleState = { plugins: [], selected: null, timer: null, review: false };

function canAdminPlugins(me) {
  const perms = (me.permissions || "").split(",");
  const scopes = (me.scopes || "").split(",");
  return (perms.includes("admin.plugins") || scopes.includes("service")) &&
    (scopes.includes("approve") || scopes.includes("service"));
}

function initConsole(me) {
  const btn = $("#console-toggle");
  if (!canAdminPlugins(me)) return;
  btn.classList.remove("hidden");
  btn.onclick = () => showConsole($("#console").classList.contains("hidden"));
  $("#console-reload").onclick = () => act(() => api("POST", "/api/admin/plugins/reload"));
  $("#install-form").onsubmit = (ev) => { ev.preventDefault(); installPlugin(); };
  $("#mcp-form").onsubmit = (ev) => { ev.preventDefault(); addMcpServer(); };
  $("#mcp-transport").onchange = () => {
    const http = $("#mcp-transport").value === "http";
    document.querySelectorAll(".mcp-stdio").forEach((e) => e.classList.toggle("hidden", http));
    document.querySelectorAll(".mcp-http").forEach((e) => e.classList.toggle("hidden", !http));
  };
  if (location.hash === "#plugins") showConsole(true);
}

function showConsole(on) {
  $("#console").classList.toggle("hidden", !on);
  $("#panes").classList.toggle("hidden", on);
  $("#governance").classList.add("hidden");
  $("#console-toggle").textContent = on ? "Workstreams" : "Plugins";
  history.replaceState(null, "", on ? "#plugins" : location.pathname);
  clearInterval(consoleState.timer);
  if (on) {
    loadPlugins();
    // Changes made on other nodes or with the CLI show up without a reload.
    consoleState.timer = setInterval(loadPlugins, 3000);
  }
}

async function act(fn) {
  $("#console-error").textContent = "";
  try {
    await fn();
  } catch (e) {
    $("#console-error").textContent = e.message;
  }
  await loadPlugins();
}

async function loadPlugins() {
  try {
    const r = await api("GET", "/api/admin/plugins");
    consoleState.plugins = r.plugins;
    $("#console-gen").textContent = "generation " + r.generation;
    renderPluginTable();
    if (consoleState.selected && !consoleState.review) {
      const p = r.plugins.find((x) => x.name === consoleState.selected);
      if (p) renderDetail(p, false);
    }
    const audit = await api("GET", "/api/admin/plugins/audit?limit=20");
    const ul = $("#plugin-audit");
    ul.replaceChildren(...audit.entries.map((e) => {
      const li = document.createElement("li");
      li.textContent = `${e.timestamp} ${e.action} ${e.target || ""} by ${e.user_id || "?"}` +
        (e.detail && e.detail.via ? ` (${e.detail.via})` : "");
      return li;
    }));
  } catch (e) {
    $("#console-error").textContent = e.message;
  }
}

function cell(text) {
  const td = document.createElement("td");
  td.textContent = text == null ? "" : String(text);
  return td;
}

function renderPluginTable() {
  const body = $("#plugin-table tbody");
  body.replaceChildren(...consoleState.plugins.map((p) => {
    const tr = document.createElement("tr");
    tr.dataset.name = p.name;
    tr.classList.toggle("selected", p.name === consoleState.selected);
    const state = document.createElement("td");
    const badge = document.createElement("span");
    badge.className = "badge " + p.state;
    badge.textContent = p.state.replace("_", " ");
    state.append(badge);
    if (p.channel) {
      // A channel adapter's platform link on this node.
      const link = document.createElement("span");
      link.className = "badge channel-link " + p.channel.state;
      link.textContent = p.channel.state;
      link.title = `${p.channel.platform || p.name}: ${p.channel.detail || p.channel.state}` +
        (p.channel.restarts ? ` · ${p.channel.restarts} restarts` : "");
      state.append(" ", link);
    }
    const en = document.createElement("td");
    const box = document.createElement("input");
    box.type = "checkbox";
    box.className = "plugin-enabled";
    box.checked = p.enabled;
    box.title = p.enabled ? "Disable" : "Enable";
    box.onclick = (ev) => {
      ev.stopPropagation();
      act(() => api("POST", `/api/admin/plugins/${encodeURIComponent(p.name)}/${box.checked ? "enable" : "disable"}`));
    };
    en.append(box);
    const c = p.counters;
    tr.append(cell(p.name + (p.builtin ? " (built-in)" : "")), cell(p.version), cell(p.kind), cell(p.wit),
      state, en, cell(p.tools.length), cell(`${c.calls} / ${c.failures} / ${c.denials}`), cell(p.last_error || ""));
    tr.onclick = () => { consoleState.review = false; consoleState.selected = p.name; renderDetail(p, false); renderPluginTable(); };
    return tr;
  }));
}

const LIST_KINDS = [["http", "Outbound HTTP"], ["exec", "Programs"], ["env", "Environment"], ["secrets", "Secrets"]];
// Capabilities that are a switch: [key, row title, checkbox label].
const FLAG_KINDS = [
  ["model", "model access", "may ask the session's model"],
  ["history", "history", "may search the caller's own conversations"],
  ["session", "session info", "may learn the caller's workstream, user and model"],
  ["agents", "sub-agents", "may run sub-agents for the caller"],
  ["watches", "watches", "may create and cancel the caller's watches"],
  ["notify", "notifications", "may read and deliver to the caller's notification targets"],
  ["preview", "preview pane", "may open content in the caller's preview pane"],
];
// Capabilities with a level (read-only / read-write): [key, row title].
const LEVEL_KINDS = [["memory", "memories"], ["skills", "skills"]];

// Requested (left) vs granted (right, editable) for every capability family.
function renderDetail(p, review) {
  const el = $("#plugin-detail");
  el.classList.remove("hidden");
  el.replaceChildren();
  const h = document.createElement("h3");
  h.textContent = review ? `Review ${p.name} ${p.version || ""}: grant what it may use` : `${p.name} ${p.version || ""}`;
  const meta = document.createElement("p");
  meta.className = "muted";
  meta.textContent = `${p.description || ""} · grant from: ${p.grant_source} · tools: ${p.tools.join(", ") || "-"}`;
  el.append(h, meta);
  if (p.mcp) {
    const m = document.createElement("p");
    m.className = "muted mcp-detail";
    m.textContent = `MCP ${p.mcp.transport} · ${p.mcp.target} · defined in ${p.mcp.origin === "api" ? "the database" : "config.toml"}` +
      ` · resources: ${p.mcp.resources.length} · prompts: ${p.mcp.prompts.length} · breaker openings: ${p.mcp.breaker_openings}` +
      (p.mcp.retry_in_secs != null ? ` · probe in ${p.mcp.retry_in_secs}s` : "");
    el.append(m);
  }
  if (p.channel) {
    const c = document.createElement("p");
    c.className = "muted channel-detail";
    c.textContent = `Channel ${p.channel.platform || p.name}: ${p.channel.state}` +
      (p.channel.detail ? ` · ${p.channel.detail}` : "") +
      ` · restarts: ${p.channel.restarts} · for ${p.channel.since_secs}s`;
    el.append(c);
  }
  if (p.last_error) {
    const err = document.createElement("p");
    err.className = "error";
    err.textContent = (p.state === "update_failed" ? "Update failed (previous version serving): " : "Error: ") + p.last_error;
    el.append(err);
  }
  const req = p.requested || {};
  const got = p.granted || {};
  const grid = document.createElement("div");
  grid.className = "grants";
  const head = (t) => { const d = document.createElement("div"); d.className = "head"; d.textContent = t; return d; };
  grid.append(head("Requested"), head("Granted"));
  const row = (left, right) => { const a = document.createElement("div"); a.textContent = left; grid.append(a, right); };
  const check = (kind, value, on, label) => {
    const l = document.createElement("label");
    const b = document.createElement("input");
    b.type = "checkbox";
    b.checked = on;
    b.dataset.kind = kind;
    b.dataset.value = value;
    l.append(b, " " + (label || value));
    return l;
  };
  (req.filesystem || []).forEach((f) => {
    const on = (got.filesystem || []).some((g) => g.path === f.path);
    row(`filesystem ${f.path} (${f.access})`, check("filesystem", JSON.stringify(f), on, `${f.path} (${f.access})`));
  });
  // Directories granted beyond the request (an MCP server's), kept unless unticked.
  (got.filesystem || []).filter((g) => !(req.filesystem || []).some((f) => f.path === g.path)).forEach((g) =>
    row(`filesystem (granted) ${g.path}`, check("filesystem", JSON.stringify(g), true, `${g.path} (${g.access})`)));
  LIST_KINDS.forEach(([kind, title]) => {
    const wanted = req[kind] || [];
    const have = got[kind] || [];
    if (kind === "secrets") {
      // A secret is a name or {name, hosts, header}: granting it grants the binding asked for.
      wanted.filter((v) => secretName(v) !== "<configured>").forEach((v) => row(`${title}: ${secretLabel(v)}`,
        check(kind, JSON.stringify(v), have.some((h) => secretName(h) === secretName(v)), secretLabel(v))));
      const extra = have.filter((h) => !wanted.some((v) => secretName(v) === secretName(h)));
      if (wanted.length || extra.length) {
        const input = document.createElement("input");
        input.className = "grant-extra";
        input.dataset.kind = kind;
        input.placeholder = "more secret names, comma-separated";
        input.value = extra.map(secretName).join(", ");
        row(`${title}: other secrets`, input);
      }
      return;
    }
    wanted.forEach((v) => row(`${title}: ${v}`, check(kind, v, have.includes(v))));
    // Concrete values for requests like "<configured>" (e.g. a provider's model host).
    const extra = have.filter((v) => !wanted.includes(v));
    if (kind === "http" && (wanted.length || extra.length)) {
      const input = document.createElement("input");
      input.className = "grant-extra";
      input.dataset.kind = kind;
      input.placeholder = "more hosts, comma-separated";
      input.value = extra.join(", ");
      row(`${title}: other hosts`, input);
    }
  });
  FLAG_KINDS.forEach(([kind, title, label]) => {
    if (req[kind]) row(title, check(kind, "true", !!got[kind], label));
  });
  LEVEL_KINDS.forEach(([kind, title]) => {
    // A level: granted at most what is requested (read-only or read-write).
    if (req[kind]) row(`${title} (${req[kind]})`, check(kind, req[kind], !!got[kind], `${req[kind]}`));
  });
  // Spawned processes run in the kernel sandbox unless the operator opts out.
  if ((req.exec || []).length || got.process_sandbox) {
    row("process sandbox", check("process_sandbox", "off", got.process_sandbox === "off",
      "run its processes outside the kernel sandbox (not recommended)"));
  }
  if (grid.children.length === 2) row("nothing", document.createTextNode("nothing to grant"));
  el.append(grid);
  const actions = document.createElement("div");
  actions.className = "detail-actions";
  const button = (text, cls, fn) => { const b = document.createElement("button"); b.textContent = text; b.className = cls; b.onclick = fn; actions.append(b); };
  const url = `/api/admin/plugins/${encodeURIComponent(p.name)}`;
  if (review) {
    button("Grant selected & enable", "grant-enable", () => act(async () => {
      await api("PUT", url + "/grants", { grant: collectGrant(el) });
      await api("POST", url + "/enable");
      consoleState.review = false;
    }));
    button("Keep disabled", "grant-later", () => { consoleState.review = false; loadPlugins(); });
  } else {
    button("Save grant", "grant-save", () => act(() => api("PUT", url + "/grants", { grant: collectGrant(el) })));
    button("Reset to default", "grant-default", () => act(() => api("PUT", url + "/grants", { default: true })));
    button(p.kind === "mcp" ? "Reconnect" : "Reload", "plugin-reload", () => act(() => api("POST", url + "/reload")));
    if (p.kind === "mcp") {
      if (p.mcp && p.mcp.origin === "api") {
        const murl = `/api/admin/mcp-servers/${encodeURIComponent(p.name)}`;
        button("Delete", "plugin-uninstall", () => {
          if (confirm(`Delete MCP server ${p.name}?`)) act(async () => { await api("DELETE", murl); consoleState.selected = null; $("#plugin-detail").classList.add("hidden"); });
        });
      }
    } else if (!p.builtin) {
      button("Uninstall", "plugin-uninstall", () => {
        if (confirm(`Uninstall ${p.name}?`)) act(async () => { await api("DELETE", url); consoleState.selected = null; $("#plugin-detail").classList.add("hidden"); });
      });
    }
  }
  el.append(actions);
}

function secretName(v) { return typeof v === "string" ? v : v.name; }
function secretLabel(v) {
  if (typeof v === "string") return v;
  const hosts = v.hosts && v.hosts.length ? ` to ${v.hosts.join(", ")}` : "";
  const header = v.header ? ` in ${[].concat(v.header).join(", ")}` : "";
  return `${v.name}${hosts}${header}`;
}

function collectGrant(el) {
  const grant = { filesystem: [], http: [], exec: [], env: [], secrets: [] };
  el.querySelectorAll(".grants input[type=checkbox]:checked").forEach((b) => {
    const kind = b.dataset.kind;
    if (kind === "filesystem") grant.filesystem.push(JSON.parse(b.dataset.value));
    else if (FLAG_KINDS.some(([k]) => k === kind)) grant[kind] = true;
    else if (LEVEL_KINDS.some(([k]) => k === kind)) grant[kind] = b.dataset.value;
    else if (kind === "secrets") grant.secrets.push(JSON.parse(b.dataset.value));
    else if (kind === "process_sandbox") grant.process_sandbox = "off";
    else grant[kind].push(b.dataset.value);
  });
  el.querySelectorAll(".grant-extra").forEach((i) => {
    const list = grant[i.dataset.kind];
    i.value.split(",").map((s) => s.trim()).filter(Boolean).forEach((v) => {
      if (!list.some((have) => (i.dataset.kind === "secrets" ? secretName(have) : have) === v)) list.push(v);
    });
  });
  return grant;
}

async function installPlugin() {
  $("#console-error").textContent = "";
  const manifest = $("#install-manifest").files[0];
  const component = $("#install-component").files[0];
  if (!manifest || !component) {
    $("#console-error").textContent = "choose both plugin.toml and the .wasm component";
    return;
  }
  const form = new FormData();
  form.append("manifest", manifest);
  form.append("component", component);
  const replace = $("#install-replace").checked ? "?replace=true" : "";
  const r = await fetch("/v1/api/admin/plugins/install" + replace, { method: "POST", body: form, credentials: "same-origin" });
  let data = null;
  try { data = await r.json(); } catch (_) { data = null; }
  if (!r.ok) {
    $("#console-error").textContent = (data && data.error) || r.statusText;
    return;
  }
  $("#install-form").reset();
  consoleState.selected = data.name;
  consoleState.review = data.state === "disabled";
  renderDetail(data, consoleState.review);
  await loadPlugins();
}

async function addMcpServer() {
  $("#console-error").textContent = "";
  const http = $("#mcp-transport").value === "http";
  const server = { type: http ? "http" : "stdio", auto_approve: $("#mcp-auto").checked };
  if (http) {
    server.url = $("#mcp-url").value.trim();
    const secret = $("#mcp-secret").value.trim();
    if (secret) server.bearer_secret = secret;
  } else {
    server.command = $("#mcp-command").value.trim();
    server.args = $("#mcp-args").value.split("\n").map((a) => a.trim()).filter(Boolean);
  }
  try {
    const p = await api("POST", "/api/admin/mcp-servers", { name: $("#mcp-name").value.trim(), server });
    $("#mcp-form").reset();
    $("#mcp-transport").onchange();
    consoleState.selected = p.name;
    consoleState.review = true;
    renderDetail(p, true);
  } catch (e) {
    $("#console-error").textContent = e.message;
  }
  await loadPlugins();
}
