// Turnstone browser UI: workstream tabs, split panes, streaming markdown,
// approvals and resumable SSE. Talks only to this server (cookie auth).
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const MAX_PANES = 6;
const state = { me: null, roster: new Map(), panes: [], focused: 0, global: null };

async function api(method, path, body) {
  const opts = { method, headers: {}, credentials: "same-origin" };
  if (body !== undefined) {
    opts.headers["content-type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const r = await fetch("/v1" + path, opts);
  let data = null;
  try { data = await r.json(); } catch (_) { data = null; }
  if (!r.ok) {
    const err = new Error((data && data.error) || r.statusText);
    err.status = r.status;
    throw err;
  }
  return data;
}

// ---------- markdown ----------
function renderMarkdown(el, text) {
  const html = DOMPurify.sanitize(marked.parse(text, { gfm: true, breaks: false }));
  el.innerHTML = html;
  el.querySelectorAll("pre code").forEach((c) => { try { hljs.highlightElement(c); } catch (_) {} });
  try {
    renderMathInElement(el, {
      delimiters: [
        { left: "$$", right: "$$", display: true },
        { left: "\\[", right: "\\]", display: true },
        { left: "\\(", right: "\\)", display: false },
        { left: "$", right: "$", display: false },
      ],
      throwOnError: false,
    });
  } catch (_) {}
}

// ---------- auth ----------
async function boot() {
  applyTheme(localStorage.getItem("turnstone.theme") || "dark");
  const st = await api("GET", "/api/auth/status");
  if (st.setup_required) return showAuth(true);
  try {
    state.me = await api("GET", "/api/auth/whoami");
  } catch (e) {
    return showAuth(false);
  }
  startApp();
}

function showAuth(setup) {
  $("#auth").classList.remove("hidden");
  $("#app").classList.add("hidden");
  $("#auth-title").textContent = setup ? "Create the first administrator" : "Sign in";
  $("#auth-submit").textContent = setup ? "Create account" : "Sign in";
  $("#auth-display").classList.toggle("hidden", !setup);
  $("#auth-form").onsubmit = async (ev) => {
    ev.preventDefault();
    const username = $("#auth-user").value.trim();
    const password = $("#auth-pass").value;
    try {
      if (setup) {
        await api("POST", "/api/auth/setup", {
          username, password, display_name: $("#auth-display").value.trim() || username,
        });
      } else {
        await api("POST", "/api/auth/login", { username, password });
      }
      state.me = await api("GET", "/api/auth/whoami");
      $("#auth").classList.add("hidden");
      startApp();
    } catch (e) {
      $("#auth-error").textContent = e.message;
    }
  };
}

// ---------- app shell ----------
async function startApp() {
  $("#app").classList.remove("hidden");
  $("#who").textContent = state.me.display_name || state.me.username;
  $("#logout").onclick = async () => { await api("POST", "/api/auth/logout"); location.reload(); };
  $("#new-ws").onclick = () => newWorkstream();
  $("#link-chat").onclick = async () => {
    try {
      const r = await api("POST", "/api/channels/link-code");
      alert(`${r.instructions}\n\nCode: ${r.code}`);
    } catch (e) {
      alert(`No link code: ${e.message || e}`);
    }
  };
  $("#split").onclick = () => splitPane();
  $("#theme").onclick = () => applyTheme(document.documentElement.dataset.theme === "dark" ? "light" : "dark");
  document.addEventListener("keydown", onGlobalKey);
  if (window.initConsole) initConsole(state.me);
  if (window.initGovernance) initGovernance(state.me);
  await refreshRoster();
  connectGlobal(1000);
  const saved = JSON.parse(localStorage.getItem("turnstone.layout") || "[]");
  const ids = saved.filter((id) => state.roster.has(id)).slice(0, MAX_PANES);
  if (ids.length === 0 && state.roster.size > 0) ids.push([...state.roster.keys()][0]);
  if (ids.length === 0) ids.push(null);
  ids.forEach((id) => addPane(id));
  focusPane(0);
}

function applyTheme(t) {
  document.documentElement.dataset.theme = t;
  $("#hl-theme").href = t === "dark" ? "/static/vendor/hl-dark.css" : "/static/vendor/hl-light.css";
  localStorage.setItem("turnstone.theme", t);
}

function saveLayout() {
  localStorage.setItem("turnstone.layout", JSON.stringify(state.panes.map((p) => p.wsId).filter(Boolean)));
}

async function refreshRoster() {
  const r = await api("GET", "/api/workstreams");
  state.roster.clear();
  r.workstreams.forEach((w) => state.roster.set(w.ws_id, { name: w.name, state: w.state }));
  renderTabs();
}

function renderTabs() {
  const nav = $("#tabs");
  nav.textContent = "";
  const active = state.panes[state.focused] && state.panes[state.focused].wsId;
  for (const [id, w] of state.roster) {
    const b = document.createElement("button");
    b.className = "tab" + (id === active ? " active" : "");
    b.dataset.wsId = id;
    b.setAttribute("role", "tab");
    const dot = document.createElement("span");
    dot.className = "dot " + w.state;
    const label = document.createElement("span");
    label.textContent = w.name;
    const close = document.createElement("span");
    close.textContent = "×";
    close.title = "Close workstream";
    close.className = "tab-close";
    close.onclick = (ev) => { ev.stopPropagation(); closeWorkstream(id); };
    b.append(dot, label, close);
    b.onclick = () => showInFocused(id);
    nav.append(b);
  }
}

function connectGlobal(delay) {
  const es = new EventSource("/v1/api/events/global");
  state.global = es;
  es.onmessage = (m) => {
    let e;
    try { e = JSON.parse(m.data); } catch (_) { return; }
    if (e.type === "ws_created") {
      state.roster.set(e.ws_id, { name: e.name, state: "idle" });
    } else if (e.type === "ws_state" && state.roster.has(e.ws_id)) {
      state.roster.get(e.ws_id).state = e.state;
    } else if (e.type === "ws_rename" && state.roster.has(e.ws_id)) {
      state.roster.get(e.ws_id).name = e.name;
    } else if (e.type === "ws_closed") {
      state.roster.delete(e.ws_id);
    } else if (e.type !== "node_snapshot") {
      return;
    }
    renderTabs();
  };
  es.onerror = () => {
    es.close();
    setTimeout(() => connectGlobal(Math.min(delay * 2, 30000)), delay);
  };
  es.onopen = () => { delay = 1000; };
}

async function newWorkstream() {
  try {
    const r = await api("POST", "/api/workstreams/new", {});
    state.roster.set(r.ws_id, { name: r.name, state: "idle" });
    renderTabs();
    showInFocused(r.ws_id);
  } catch (e) {
    alert("Could not create a workstream: " + e.message);
  }
}

async function closeWorkstream(id) {
  try { await api("POST", `/api/workstreams/${id}/close`, {}); } catch (_) {}
  state.roster.delete(id);
  state.panes.forEach((p) => { if (p.wsId === id) p.attach(null); });
  renderTabs();
  saveLayout();
}

function showInFocused(id) {
  const p = state.panes[state.focused];
  if (p) p.attach(id);
  renderTabs();
  saveLayout();
}

function splitPane() {
  if (state.panes.length >= MAX_PANES) return;
  addPane(null);
  focusPane(state.panes.length - 1);
}

function layoutGrid() {
  const n = state.panes.length;
  const cols = n <= 1 ? 1 : n <= 4 ? 2 : 3;
  $("#panes").style.gridTemplateColumns = `repeat(${cols}, minmax(0, 1fr))`;
}

function addPane(wsId) {
  const p = new Pane();
  state.panes.push(p);
  $("#panes").append(p.el);
  layoutGrid();
  p.attach(wsId);
}

function removePane(p) {
  if (state.panes.length === 1) { p.attach(null); return; }
  p.attach(null);
  p.el.remove();
  state.panes.splice(state.panes.indexOf(p), 1);
  layoutGrid();
  focusPane(Math.min(state.focused, state.panes.length - 1));
  saveLayout();
}

function focusPane(i) {
  state.focused = i;
  state.panes.forEach((p, j) => p.el.classList.toggle("focused", i === j));
  const p = state.panes[i];
  if (p) $("textarea", p.el).focus();
  renderTabs();
}

function onGlobalKey(ev) {
  if (ev.altKey && /^[1-6]$/.test(ev.key) && state.panes[+ev.key - 1]) {
    ev.preventDefault();
    focusPane(+ev.key - 1);
  } else if (ev.altKey && (ev.key === "\\" || ev.key === "s")) {
    ev.preventDefault();
    splitPane();
  } else if (ev.altKey && ev.key === "w") {
    ev.preventDefault();
    removePane(state.panes[state.focused]);
  } else if (ev.altKey && ev.key === "n") {
    ev.preventDefault();
    newWorkstream();
  } else {
    const p = state.panes[state.focused];
    if (p) p.onKey(ev);
  }
}

// ---------- one pane ----------
class Pane {
  constructor() {
    this.el = $("#pane-tpl").content.firstElementChild.cloneNode(true);
    this.log = $(".log", this.el);
    this.wsId = null;
    this.es = null;
    this.lastId = null;
    this.backoff = 500;
    this.cards = new Map();
    this.tools = new Map();
    this.agents = new Map();
    this.watches = new Map();
    this.preview = new PreviewPane(this.el);
    this.cur = null;
    this.el.addEventListener("mousedown", () => focusPane(state.panes.indexOf(this)));
    $(".pane-close", this.el).onclick = () => removePane(this);
    $(".pane-cancel", this.el).onclick = () => this.cancel();
    const ta = $("textarea", this.el);
    $(".composer", this.el).onsubmit = (ev) => { ev.preventDefault(); this.send(); };
    ta.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); this.send(); }
    });
    this.files = [];
    $('input[type="file"]', this.el).addEventListener("change", (ev) => {
      this.upload([...ev.target.files]);
      ev.target.value = "";
    });
  }

  async ensureWorkstream() {
    if (this.wsId) return;
    const r = await api("POST", "/api/workstreams/new", {});
    state.roster.set(r.ws_id, { name: r.name, state: "idle" });
    this.attach(r.ws_id);
    renderTabs();
    saveLayout();
    await new Promise((res) => setTimeout(res, 200));
  }

  async upload(files) {
    await this.ensureWorkstream();
    for (const f of files) {
      const fd = new FormData();
      fd.append("file", f, f.name);
      const r = await fetch(`/v1/api/workstreams/${this.wsId}/attachments`, {
        method: "POST", body: fd, credentials: "same-origin",
      });
      const data = await r.json().catch(() => ({}));
      if (!r.ok) { this.info(`${f.name}: ${data.error || r.statusText}`, "error"); continue; }
      this.files.push(data);
    }
    this.renderFiles();
  }

  renderFiles() {
    const box = $(".pending-files", this.el);
    box.textContent = "";
    for (const f of this.files) {
      const chip = document.createElement("span");
      chip.className = "chip";
      chip.textContent = f.filename;
      const x = document.createElement("button");
      x.textContent = "×";
      x.title = "Remove";
      x.onclick = async () => {
        try { await api("DELETE", `/api/workstreams/${this.wsId}/attachments/${f.attachment_id}`); } catch (_) {}
        this.files = this.files.filter((g) => g !== f);
        this.renderFiles();
      };
      chip.append(x);
      box.append(chip);
    }
  }

  attach(wsId) {
    if (this.es) { this.es.close(); this.es = null; }
    clearTimeout(this.retryTimer);
    this.wsId = wsId;
    this.lastId = null;
    this.log.textContent = "";
    this.cards.clear();
    this.tools.clear();
    this.agents.clear();
    this.watches.clear();
    this.renderWatches();
    this.preview.clear();
    this.cur = null;
    this.files = [];
    $(".pending-files", this.el).textContent = "";
    const w = wsId && state.roster.get(wsId);
    $(".pane-name", this.el).textContent = w ? w.name : "(no workstream: pick a tab or + New)";
    this.setState(w ? w.state : "");
    if (wsId) this.loadHistory();
  }

  setState(s) {
    $(".dot", this.el).className = "dot " + (s || "");
    $(".pane-state", this.el).textContent = s || "";
    this.el.dataset.state = s || "";
  }

  async loadHistory() {
    const id = this.wsId;
    let h;
    try {
      h = await api("GET", `/api/workstreams/${id}/history?limit=500`);
    } catch (e) {
      this.info("Could not load history: " + e.message, "error");
      return;
    }
    if (id !== this.wsId) return;
    this.log.textContent = "";
    for (const m of h.messages) this.renderStored(m);
    this.scroll();
    this.connect(h.handoff_token);
    this.linkTranscripts(id);
    this.loadWatches(id);
    this.preview.load(id);
  }

  renderStored(m) {
    if (m.role === "user" && m.source === "watch") {
      this.notice("watch", m.content || "");
    } else if (m.role === "user") {
      this.addUser(m.content || "", m.attachments);
    } else if (m.role === "assistant") {
      if (m.reasoning) this.newAssistant().reasoning(m.reasoning);
      if (m.content) this.newAssistant().append(m.content);
      this.cur = null;
      (m.tool_calls || []).forEach((c) => this.toolBox(c.id, `${c.name}: ${c.arguments}`));
    } else if (m.role === "tool") {
      this.toolResult(m.tool_call_id, m.name, m.content || "", m.is_error, m.capabilities);
      if (m.output_flags && m.output_flags.length) Safety.warning(this.toolBox(m.tool_call_id, m.name), m.output_flags, false, "");
    }
  }

  connect(token) {
    if (!this.wsId) return;
    let url = `/v1/api/workstreams/${this.wsId}/events?user_turn=1`;
    if (this.lastId != null) url += `&last_event_id=${this.lastId}`;
    else if (token) url += `&history_token=${encodeURIComponent(token)}`;
    const es = new EventSource(url);
    this.es = es;
    $(".conn", this.el).textContent = "connecting…";
    es.onopen = () => { this.backoff = 500; $(".conn", this.el).textContent = ""; };
    es.onmessage = (m) => {
      if (m.lastEventId) this.lastId = m.lastEventId;
      let e;
      try { e = JSON.parse(m.data); } catch (_) { return; }
      this.onEvent(e);
    };
    es.onerror = () => {
      es.close();
      if (this.es !== es) return;
      this.es = null;
      $(".conn", this.el).textContent = `reconnecting in ${Math.round(this.backoff / 1000)}s…`;
      this.retryTimer = setTimeout(() => this.connect(null), this.backoff);
      this.backoff = Math.min(this.backoff * 2, 30000);
    };
  }

  onEvent(e) {
    switch (e.type) {
      case "clear_ui":
        if (e.reason !== "tokenless_history_bootstrap") { this.lastId = null; this.reload(); }
        break;
      case "state_change":
        this.setState(e.state);
        if (state.roster.has(this.wsId)) { state.roster.get(this.wsId).state = e.state; renderTabs(); }
        break;
      case "user_turn": this.addUser(e.content, e.attachments); break;
      case "system_turn": this.notice(e.source, e.content); break;
      case "watch_changed": this.watchChanged(e.watch); break;
      case "preview": this.preview.show(e); break;
      case "thinking_start": this.cur = null; break;
      case "reasoning": this.assistant().reasoning(e.text, true); break;
      case "content": this.assistant().append(e.text); break;
      case "in_progress_snapshot":
        if (e.reasoning) this.assistant().reasoning(e.reasoning, true);
        if (e.content) this.assistant().append(e.content);
        break;
      case "stream_end": if (this.cur) this.cur.finish(); this.cur = null; break;
      case "tool_pending": e.items.forEach((i) => this.toolBox(i.call_id, i.header, i.error)); break;
      case "approve_request": this.approvalCard(e); break;
      case "agent_event": this.agentEvent(e, e.parent_call_id); break;
      case "agent_context": {
        const v = this.agents.get(e.parent_call_id);
        if (v) v.context.textContent = `context ${Math.round(e.prompt_tokens / 1000)}k of ${Math.round(e.context_window / 1000)}k`;
        break;
      }
      case "approval_resolved": this.resolveCard(e); break;
      case "intent_verdict": Safety.judgeArrived(this.log, e); break;
      case "output_warning": Safety.warning(this.toolBox(e.call_id, e.func_name), e.flags, e.redacted, e.reasoning); break;
      case "tool_output_chunk": this.toolChunk(e.call_id, e.chunk); break;
      case "tool_result": if (!e.accepted) this.toolResult(e.call_id, e.name, e.output, e.is_error, e.capabilities); break;
      case "status":
        $(".status-line", this.el).textContent =
          `${e.prompt_tokens} prompt + ${e.completion_tokens} completion tokens · context ${e.pct}% of ${Math.round(e.context_window / 1000)}k`;
        break;
      case "info": this.info(e.message); break;
      case "error": this.info(e.message, "error"); break;
      case "cancelled": this.info("Cancelled."); break;
      case "replay_truncated":
        if (e.reason === "ring_evicted" || e.reason === "subscriber_lagged") { this.lastId = null; this.reload(); }
        break;
      case "ws_closed":
        this.info("This workstream was closed.");
        if (this.es) { this.es.close(); this.es = null; }
        break;
      default: break;
    }
    this.scroll();
  }

  reload() {
    if (this.es) { this.es.close(); this.es = null; }
    this.loadHistory();
  }

  scroll() {
    const l = this.log;
    if (l.scrollHeight - l.scrollTop - l.clientHeight < 200) l.scrollTop = l.scrollHeight;
  }

  addUser(text, attachments) {
    const d = document.createElement("div");
    d.className = "msg user";
    d.textContent = text;
    if (attachments && attachments.length) {
      const f = document.createElement("div");
      f.className = "files";
      f.textContent = "📎 " + attachments.map((a) => a.filename || a.kind || "file").join(", ");
      d.append(f);
    }
    this.log.append(d);
    this.cur = null;
  }

  info(text, cls = "info") {
    const d = document.createElement("div");
    d.className = "msg " + cls;
    d.textContent = text;
    this.log.append(d);
  }

  newAssistant() {
    const d = document.createElement("div");
    d.className = "msg assistant";
    const body = document.createElement("div");
    body.className = "md";
    d.append(body);
    this.log.append(d);
    let text = "";
    let think = null;
    let pending = false;
    const flush = () => { pending = false; renderMarkdown(body, text); this.scroll(); };
    this.cur = {
      append(t) {
        text += t;
        if (!pending) { pending = true; requestAnimationFrame(flush); }
        return this;
      },
      reasoning(t, streaming) {
        if (!think) {
          think = document.createElement("details");
          think.className = "reasoning";
          if (streaming) think.open = true;
          const s = document.createElement("summary");
          s.textContent = "Reasoning";
          think.append(s, document.createElement("div"));
          d.insertBefore(think, body);
        }
        think.lastChild.textContent += t;
        return this;
      },
      finish() { if (think) think.open = false; flush(); },
    };
    return this.cur;
  }

  assistant() { return this.cur || this.newAssistant(); }

  // ---- watches: the active ones above the composer; results as notices ----

  notice(source, text) {
    const d = document.createElement("div");
    d.className = "msg notice";
    const h = document.createElement("div");
    h.className = "notice-source";
    h.textContent = "◆ " + source;
    const body = document.createElement("div");
    body.className = "md";
    renderMarkdown(body, text);
    d.append(h, body);
    this.log.append(d);
    this.cur = null;
  }

  async loadWatches(id) {
    let r;
    try { r = await api("GET", `/api/workstreams/${id}/watches`); } catch (_) { return; }
    if (id !== this.wsId) return;
    this.watches.clear();
    for (const w of r.watches) this.watches.set(w.watch_id, w);
    this.renderWatches();
  }

  watchChanged(w) {
    if (w.state === "active") this.watches.set(w.watch_id, w);
    else this.watches.delete(w.watch_id);
    this.renderWatches();
  }

  renderWatches() {
    const box = $(".watches", this.el);
    box.textContent = "";
    box.classList.toggle("hidden", this.watches.size === 0);
    for (const w of this.watches.values()) {
      const chip = document.createElement("span");
      chip.className = "chip watch";
      chip.dataset.watchId = w.watch_id;
      const next = w.next_poll ? ` · next ${new Date(w.next_poll).toLocaleTimeString()}` : "";
      chip.textContent = `⏱ ${w.name} (${w.polls}/${w.max_polls}${next})`;
      chip.title = `${w.command}\n${w.stop_on ? "until " + w.stop_on : "until its output changes"}`;
      const x = document.createElement("button");
      x.textContent = "×";
      x.title = "Cancel this watch";
      x.onclick = async () => {
        try {
          await api("POST", `/api/workstreams/${this.wsId}/watches/${w.watch_id}/cancel`);
          this.watches.delete(w.watch_id);
          this.renderWatches();
        } catch (e) { this.info("Cancel failed: " + e.message, "error"); }
      };
      chip.append(x);
      box.append(chip);
    }
  }

  // ---- sub-agents: their events nest in the box of the call that runs them ----

  agentView(origin, boxKey) {
    const key = origin.agent_ws_id;
    if (this.agents.has(key)) return this.agents.get(key);
    const box = this.tools.get(boxKey) || this.toolBox(boxKey, "task_agent");
    box.open = true;
    const el = document.createElement("div");
    el.className = "agent";
    el.dataset.agentWs = key;
    const head = document.createElement("div");
    head.className = "agent-head";
    head.textContent = `sub-agent${origin.depth > 1 ? " (depth " + origin.depth + ")" : ""}`;
    const context = document.createElement("span");
    context.className = "agent-context";
    head.append(" ", context);
    el.append(head);
    box.insertBefore(el, box.lastChild);
    const view = { el, context, text: null };
    this.agents.set(key, view);
    // agent_context names the parent's call; keep both keys.
    if (origin.depth === 1) this.agents.set(origin.parent_call_id, view);
    return view;
  }

  agentEvent(e, boxKey) {
    const view = this.agentView(e, boxKey);
    const ev = e.event;
    const tkey = (id) => `${e.agent_ws_id}:${id}`;
    const box = (id, header) => {
      if (this.tools.has(tkey(id))) return this.tools.get(tkey(id));
      const d = document.createElement("details");
      d.className = "tool";
      d.dataset.callId = id;
      const s = document.createElement("summary");
      s.textContent = "⚙ " + header;
      d.append(s, document.createElement("pre"));
      view.el.append(d);
      this.tools.set(tkey(id), d);
      view.text = null;
      return d;
    };
    switch (ev.type) {
      case "agent_event": this.agentEvent(ev, tkey(ev.parent_call_id)); break;
      case "content": {
        if (!view.text) {
          const md = document.createElement("div");
          md.className = "md agent-text";
          view.el.append(md);
          view.text = { el: md, text: "" };
        }
        view.text.text += ev.text;
        renderMarkdown(view.text.el, view.text.text);
        break;
      }
      case "thinking_start": view.text = null; break;
      case "tool_info": case "tool_pending": ev.items.forEach((i) => box(i.call_id, i.header)); break;
      case "tool_output_chunk": { const d = box(ev.call_id, ev.call_id); d.lastChild.textContent += ev.chunk; break; }
      case "tool_result": {
        const d = box(ev.call_id, ev.name);
        d.lastChild.textContent = ev.output;
        d.classList.toggle("failed", !!ev.is_error);
        d.classList.add("done");
        break;
      }
      case "info": case "error": {
        const d = document.createElement("div");
        d.className = "msg " + (ev.type === "error" ? "error" : "info");
        d.textContent = ev.message;
        view.el.append(d);
        break;
      }
      default: break;
    }
  }

  // After a reload the live events are gone: offer each sub-agent's stored
  // transcript in the box of the call that ran it.
  async linkTranscripts(id) {
    let r;
    try { r = await api("GET", `/api/workstreams/${id}/children`); } catch (_) { return; }
    if (id !== this.wsId) return;
    for (const c of r.children) {
      const box = c.parent_call_id && this.tools.get(c.parent_call_id);
      if (!box || box.querySelector(".agent")) continue;
      const b = document.createElement("button");
      b.className = "agent-transcript";
      b.textContent = "Show the sub-agent's transcript";
      b.onclick = async () => {
        b.disabled = true;
        const h = await api("GET", `/api/workstreams/${c.ws_id}/history?limit=500`);
        const el = document.createElement("div");
        el.className = "agent";
        for (const m of h.messages) {
          const d = document.createElement("div");
          d.className = "msg " + (m.role === "tool" ? "info" : m.role);
          const calls = (m.tool_calls || []).map((t) => `⚙ ${t.name}: ${t.arguments}`).join("\n");
          d.textContent = [m.content || "", calls].filter(Boolean).join("\n");
          el.append(d);
        }
        b.replaceWith(el);
      };
      box.insertBefore(b, box.lastChild);
    }
  }

  toolBox(callId, header, error) {
    if (this.tools.has(callId)) return this.tools.get(callId);
    const d = document.createElement("details");
    d.className = "tool";
    d.dataset.callId = callId;
    const s = document.createElement("summary");
    s.textContent = "⚙ " + header;
    const pre = document.createElement("pre");
    if (error) { pre.textContent = error; d.classList.add("failed"); }
    d.append(s, pre);
    this.log.append(d);
    this.tools.set(callId, d);
    this.cur = null;
    return d;
  }

  toolChunk(callId, chunk) {
    const d = this.toolBox(callId, callId);
    d.open = true;
    d.querySelector(":scope > pre").textContent += chunk;
  }

  toolResult(callId, name, output, isError, capabilities) {
    const d = this.toolBox(callId, name || callId);
    d.querySelector(":scope > pre").textContent = output;
    Safety.capabilities(d, capabilities);
    d.classList.toggle("failed", !!isError);
    d.classList.add("done");
    d.open = false;
  }

  approvalCard(e) {
    if (this.cards.has(e.cycle_id)) return;
    const c = document.createElement("div");
    c.className = "approval";
    c.dataset.cycleId = e.cycle_id;
    for (const it of e.items) {
      const h = document.createElement("div");
      h.className = "hdr";
      h.textContent = (it.agent ? `[sub-agent${it.agent.depth > 1 ? " depth " + it.agent.depth : ""}] ` : "") +
        "⚙ " + it.header + (it.error ? " — " + it.error : "");
      if (it.agent) h.classList.add("from-agent");
      c.append(h);
      Safety.decorateItem(c, it, e.judge_pending);
      if (it.preview) {
        const pre = document.createElement("pre");
        for (const line of it.preview.split("\n")) {
          const span = document.createElement("span");
          if (line.startsWith("+") && !line.startsWith("+++")) span.className = "add";
          if (line.startsWith("-") && !line.startsWith("---")) span.className = "del";
          span.textContent = line + "\n";
          pre.append(span);
        }
        c.append(pre);
      }
    }
    const actions = document.createElement("div");
    actions.className = "actions";
    const fb = document.createElement("input");
    fb.placeholder = "feedback for the model (optional)";
    const mk = (label, approved, always) => {
      const b = document.createElement("button");
      b.textContent = label;
      b.className = "approve-" + label.split(" ")[0].toLowerCase();
      b.onclick = () => this.answer(e.cycle_id, approved, always, fb.value);
      return b;
    };
    actions.append(mk("Approve (y)", true, false), mk("Always (a)", true, true), mk("Deny (n)", false, false), fb);
    c.append(actions);
    this.log.append(c);
    this.cards.set(e.cycle_id, c);
    this.cur = null;
  }

  async answer(cycleId, approved, always, feedback) {
    try {
      await api("POST", `/api/workstreams/${this.wsId}/approve`, {
        cycle_id: cycleId, approved, always, feedback: feedback || null,
      });
    } catch (e) {
      this.info("Approval failed: " + e.message, "error");
    }
  }

  resolveCard(e) {
    const c = this.cards.get(e.cycle_id);
    if (!c) return;
    c.classList.add("resolved");
    c.querySelectorAll("button, input").forEach((b) => { b.disabled = true; });
    const note = document.createElement("div");
    note.className = "msg info";
    note.textContent = e.approved ? (e.always ? "Approved (always)" : "Approved") : "Denied";
    c.append(note);
    this.cards.delete(e.cycle_id);
  }

  onKey(ev) {
    if (ev.key === "Escape" && this.el.dataset.state && this.el.dataset.state !== "idle") {
      this.cancel();
      return;
    }
    // y / n / a answer the oldest open card unless the user is typing.
    const typing = ["TEXTAREA", "INPUT"].includes(document.activeElement && document.activeElement.tagName);
    if (typing || ev.ctrlKey || ev.metaKey || ev.altKey || this.cards.size === 0) return;
    const [cycleId, card] = this.cards.entries().next().value;
    const fb = $("input", card).value;
    if (ev.key === "y") this.answer(cycleId, true, false, fb);
    else if (ev.key === "a") this.answer(cycleId, true, true, fb);
    else if (ev.key === "n") this.answer(cycleId, false, false, fb);
  }

  async send() {
    const ta = $("textarea", this.el);
    const text = ta.value.trim();
    if (!text) return;
    await this.ensureWorkstream();
    ta.value = "";
    const ids = this.files.map((f) => f.attachment_id);
    try {
      const r = await api("POST", `/api/workstreams/${this.wsId}/send`, { message: text, attachment_ids: ids });
      if (r.status === "ok") { this.files = []; this.renderFiles(); }
      if (r.status === "queue_full") { this.info("The queue is full; try again when the turn ends.", "error"); ta.value = text; }
      else if (r.status === "queued") this.info("Queued: it joins the conversation after the running tools.");
    } catch (e) {
      this.info("Send failed: " + e.message, "error");
      ta.value = text;
    }
  }

  async cancel() {
    if (!this.wsId) return;
    try { await api("POST", `/api/workstreams/${this.wsId}/cancel`, {}); } catch (_) {}
  }
}

boot().catch((e) => { document.body.textContent = "Turnstone failed to start: " + e.message; });
