// What the safety layer shows in a chat: the intent judge's verdicts and
// the plugin's grants on approval cards, output-guard warnings and the
// capability audit (what a call actually touched) under each tool box.
"use strict";

const Safety = {
  /** A verdict as a pill: risk, advice, confidence and tier; the reasons in its tooltip. */
  verdict(v) {
    const s = document.createElement("span");
    s.className = `verdict risk-${v.risk_level}`;
    s.dataset.tier = v.tier;
    const conf = Math.round((v.confidence || 0) * 100);
    s.textContent = `${v.tier === "llm" ? "judge" : "heuristic"}: ${v.risk_level} risk · ${v.recommendation} (${conf}%)`;
    s.title = [v.intent_summary, v.reasoning, v.judge_model ? "model " + v.judge_model : ""]
      .filter(Boolean).join("\n");
    return s;
  },

  /** The verdicts and grants of one approval item, below its header. */
  decorateItem(card, it, judgePending) {
    const row = document.createElement("div");
    row.className = "verdicts";
    row.dataset.callId = it.call_id;
    if (it.heuristic_verdict) row.append(Safety.verdict(it.heuristic_verdict));
    if (it.judge_verdict) row.append(Safety.verdict(it.judge_verdict));
    else if (judgePending && it.needs_approval) {
      const p = document.createElement("span");
      p.className = "verdict pending";
      p.textContent = "judge reviewing…";
      row.append(p);
    }
    if (it.policy) {
      const p = document.createElement("span");
      p.className = "policy";
      p.textContent = "policy: " + it.policy;
      row.append(p);
    }
    if (row.childNodes.length) card.append(row);
    if (it.grants && it.grants.length) {
      const g = document.createElement("div");
      g.className = "grants";
      g.textContent = "may touch: " + it.grants.join(" · ");
      card.append(g);
    }
  },

  /** The LLM judge's verdict arrived for a call on an open card. */
  judgeArrived(root, v) {
    const row = root.querySelector(`.verdicts[data-call-id="${CSS.escape(v.call_id)}"]`);
    if (!row) return;
    row.querySelectorAll(".verdict.pending").forEach((p) => p.remove());
    row.append(Safety.verdict(v));
  },

  /** What the call touched, as a collapsed list under its output. */
  capabilities(box, caps) {
    if (!caps) return;
    box.querySelectorAll(".capabilities").forEach((c) => c.remove());
    const lines = [];
    for (const f of caps.files || []) lines.push([f.denied ? "denied" : "file", `${f.access} ${f.path}`, f.denied]);
    for (const h of caps.hosts || []) lines.push([h.denied ? "denied" : "host", `${h.method} ${h.host}`, h.denied]);
    for (const p of caps.processes || []) lines.push([p.denied ? "denied" : "exec", [p.program, ...(p.args || [])].join(" "), p.denied]);
    for (const s of caps.secrets || []) lines.push(["secret", s, null]);
    for (const d of caps.denials || []) lines.push(["denied", d, null]);
    if (caps.dropped) lines.push(["more", `${caps.dropped} more not listed`, null]);
    if (!lines.length) return;
    const d = document.createElement("details");
    d.className = "capabilities";
    const s = document.createElement("summary");
    const denied = lines.filter((l) => l[0] === "denied").length;
    s.textContent = `touched: ${lines.length - denied} item(s)` + (denied ? `, ${denied} refused` : "");
    const ul = document.createElement("ul");
    for (const [kind, text, why] of lines) {
      const li = document.createElement("li");
      li.className = "cap-" + kind;
      li.textContent = `${kind} ${text}` + (why ? ` — ${why}` : "");
      ul.append(li);
    }
    d.append(s, ul);
    box.append(d);
  },

  /** An output guard's finding, in the tool's box. */
  warning(box, flags, redacted, reasoning) {
    const w = document.createElement("div");
    w.className = "output-warning";
    w.textContent = `⚠ ${flags.join(", ")}${redacted ? " (redacted before the model saw it)" : ""}`;
    if (reasoning) w.title = reasoning;
    box.insertBefore(w, box.querySelector(":scope > pre"));
  },
};
