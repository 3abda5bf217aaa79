// Governance console: tool policies (list, add, enable/disable, delete),
// model usage grouped by user, model and day, and the audit log with
// filters and paging. Shown to callers with approve scope and the
// admin.policies / admin.usage / admin.audit permissions; the server checks
// them on every call.
"use strict";

const gov = { before: null, filter: {} };

function govPerms(me) {
  const perms = (me.permissions || "").split(",");
  const scopes = (me.scopes || "").split(",");
  const service = scopes.includes("service");
  const approve = scopes.includes("approve") || service;
  const has = (p) => approve && (service || perms.includes(p));
  return { policies: has("admin.policies"), usage: has("admin.usage"), audit: has("admin.audit") };
}

function initGovernance(me) {
  const can = govPerms(me);
  if (!can.policies && !can.usage && !can.audit) return;
  gov.can = can;
  $("#gov-policies").classList.toggle("hidden", !can.policies);
  $("#gov-usage").classList.toggle("hidden", !can.usage);
  $("#gov-audit").classList.toggle("hidden", !can.audit);
  const btn = $("#gov-toggle");
  btn.classList.remove("hidden");
  btn.onclick = () => showGovernance($("#governance").classList.contains("hidden"));
  $("#policy-form").onsubmit = (ev) => { ev.preventDefault(); addPolicy(); };
  $("#usage-form").onsubmit = (ev) => { ev.preventDefault(); loadUsage(); };
  $("#audit-form").onsubmit = (ev) => {
    ev.preventDefault();
    gov.filter = { action: $("#audit-action").value.trim(), user_id: $("#audit-user").value.trim() };
    loadAudit(false);
  };
  $("#audit-older").onclick = () => loadAudit(true);
  if (location.hash === "#governance") showGovernance(true);
}

function showGovernance(on) {
  $("#governance").classList.toggle("hidden", !on);
  $("#panes").classList.toggle("hidden", on);
  $("#console").classList.add("hidden");
  $("#gov-toggle").textContent = on ? "Workstreams" : "Governance";
  history.replaceState(null, "", on ? "#governance" : location.pathname);
  if (!on) return;
  if (gov.can.policies) loadPolicies();
  if (gov.can.usage) loadUsage();
  if (gov.can.audit) loadAudit(false);
}

async function govAct(fn) {
  $("#gov-error").textContent = "";
  try {
    await fn();
  } catch (e) {
    $("#gov-error").textContent = e.message;
  }
}

function td(text) {
  const c = document.createElement("td");
  c.textContent = text == null ? "" : String(text);
  return c;
}

async function loadPolicies() {
  await govAct(async () => {
    const r = await api("GET", "/api/admin/policies");
    const rows = r.policies.map((p) => {
      const tr = document.createElement("tr");
      tr.dataset.policy = p.name;
      const toggle = document.createElement("input");
      toggle.type = "checkbox";
      toggle.checked = p.enabled;
      toggle.title = "Enabled";
      toggle.onchange = () => govAct(async () => {
        await api("PUT", `/api/admin/policies/${p.policy_id}`, {
          name: p.name, tool_pattern: p.tool_pattern, action: p.action,
          role: p.role || undefined, priority: p.priority, enabled: toggle.checked,
          description: p.description,
        });
        await loadPolicies();
      });
      const en = document.createElement("td");
      en.append(toggle);
      const del = document.createElement("button");
      del.textContent = "Delete";
      del.onclick = () => govAct(async () => {
        if (!confirm(`Delete policy ${p.name}?`)) return;
        await api("DELETE", `/api/admin/policies/${p.policy_id}`);
        await loadPolicies();
      });
      const act = document.createElement("td");
      act.append(del);
      const action = td(p.action);
      action.className = "policy-" + p.action;
      tr.append(td(p.priority), td(p.name), td(p.tool_pattern), action, td(p.role || "everyone"), en,
        td(p.description), act);
      return tr;
    });
    $("#policy-table tbody").replaceChildren(...rows);
  });
}

async function addPolicy() {
  await govAct(async () => {
    const role = $("#policy-role").value;
    const body = {
      name: $("#policy-name").value.trim(),
      tool_pattern: $("#policy-tools").value.trim(),
      action: $("#policy-action").value,
      priority: Number($("#policy-priority").value || 100),
      description: $("#policy-description").value,
    };
    if (role) body.role = role;
    await api("POST", "/api/admin/policies", body);
    $("#policy-form").reset();
    await loadPolicies();
  });
}

async function loadUsage() {
  await govAct(async () => {
    const q = new URLSearchParams({ group_by: $("#usage-group").value });
    const since = $("#usage-since").value;
    if (since) q.set("since", since);
    const r = await api("GET", "/api/admin/usage?" + q);
    const row = (u, total) => {
      const tr = document.createElement("tr");
      if (total) tr.className = "total";
      tr.append(td(total ? "total" : (u.username || u.user_id || "—")), td(u.model || (total ? "" : "—")),
        td(u.day || ""), td(u.calls), td(u.prompt_tokens), td(u.completion_tokens), td(u.cached_tokens),
        td(u.tool_calls), td(u.avg_latency_ms));
      return tr;
    };
    $("#usage-table tbody").replaceChildren(...r.rows.map((u) => row(u, false)), row(r.total, true));
  });
}

async function loadAudit(older) {
  await govAct(async () => {
    const q = new URLSearchParams({ limit: "50" });
    if (gov.filter.action) q.set("action", gov.filter.action);
    if (gov.filter.user_id) q.set("user_id", gov.filter.user_id);
    if (older && gov.before) q.set("before", gov.before);
    const r = await api("GET", "/api/admin/audit?" + q);
    const rows = r.entries.map((e) => {
      const tr = document.createElement("tr");
      const detail = td(e.detail == null ? "" : JSON.stringify(e.detail));
      detail.className = "audit-detail";
      tr.append(td(e.id), td(e.timestamp), td(e.action), td(e.target), td(e.user_id), td(e.ip), detail);
      return tr;
    });
    const body = $("#audit-table tbody");
    if (older) body.append(...rows); else body.replaceChildren(...rows);
    gov.before = r.next_before;
    $("#audit-older").classList.toggle("hidden", r.next_before == null);
  });
}
