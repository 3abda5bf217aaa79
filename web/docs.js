// Renders /openapi.json as a readable reference (tags → operations → params and body fields).
"use strict";
(async () => {
  const root = document.getElementById("api");
  const doc = await (await fetch("/openapi.json")).json();
  const schemas = (doc.components && doc.components.schemas) || {};
  const resolve = (s) => (s && s.$ref ? schemas[s.$ref.split("/").pop()] : s) || {};
  const el = (tag, text, cls) => {
    const e = document.createElement(tag);
    if (text != null) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  };
  const byTag = new Map();
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const [method, op] of Object.entries(item)) {
      const tag = (op.tags && op.tags[0]) || "other";
      if (!byTag.has(tag)) byTag.set(tag, []);
      byTag.get(tag).push({ path, method, op });
    }
  }
  root.textContent = "";
  for (const [tag, ops] of byTag) {
    root.append(el("h2", tag));
    for (const { path, method, op } of ops) {
      const d = el("details", null, "op");
      const s = el("summary");
      s.append(el("span", method.toUpperCase(), "m " + method), el("span", path + "  "), el("span", op.summary || "", "pane-state"));
      d.append(s);
      const body = el("div");
      const rows = [];
      for (const p of op.parameters || []) rows.push([p.name, p.in, (p.schema && p.schema.type) || "", p.description || ""]);
      const rb = op.requestBody && op.requestBody.content && op.requestBody.content["application/json"];
      if (rb) {
        const sc = resolve(rb.schema);
        const req = sc.required || [];
        for (const [name, prop] of Object.entries(sc.properties || {})) {
          const t = Array.isArray(prop.type) ? prop.type.join("|") : prop.type || "";
          rows.push([name + (req.includes(name) ? " *" : ""), "body", t, prop.description || ""]);
        }
      }
      if (rows.length) {
        const t = el("table");
        const h = el("tr");
        ["name", "in", "type", "description"].forEach((x) => h.append(el("th", x)));
        t.append(h);
        for (const r of rows) {
          const tr = el("tr");
          r.forEach((x) => tr.append(el("td", x)));
          t.append(tr);
        }
        body.append(t);
      }
      body.append(el("p", "Responses: " + Object.keys(op.responses || {}).join(", ")));
      d.append(body);
      root.append(d);
    }
  }
})().catch((e) => { document.getElementById("api").textContent = "Could not load the API description: " + e.message; });
