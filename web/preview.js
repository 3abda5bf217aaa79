// The preview pane beside a workstream's chat: what open_preview showed.
// Pages load in an iframe with every sandbox restriction (no scripts, an
// opaque origin) from a URL whose CSP also forbids every fetch; text, Markdown
// and tables are fetched and rendered here as inert text (Markdown through
// DOMPurify); images as <img>; PDFs in the browser's own viewer.
"use strict";

/** Splits delimited text into rows, honouring double quotes. */
function parseDelimited(text, sep) {
  const rows = [];
  let row = [], cell = "", quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { cell += '"'; i++; }
      else if (c === '"') quoted = false;
      else cell += c;
    } else if (c === '"' && cell === "") quoted = true;
    else if (c === sep) { row.push(cell); cell = ""; }
    else if (c === "\n" || c === "\r") {
      if (c === "\r" && text[i + 1] === "\n") i++;
      row.push(cell); rows.push(row); row = []; cell = "";
    } else cell += c;
  }
  if (cell !== "" || row.length) { row.push(cell); rows.push(row); }
  return rows;
}

/** Header and rows of a JSON value shown as a table. */
function jsonRows(v) {
  if (Array.isArray(v) && v.length && v.every((r) => r && typeof r === "object" && !Array.isArray(r))) {
    const keys = [...new Set(v.flatMap((r) => Object.keys(r)))];
    return [keys, ...v.map((r) => keys.map((k) => cell(r[k])))];
  }
  if (Array.isArray(v) && v.every(Array.isArray)) return v.map((r) => r.map(cell));
  if (Array.isArray(v)) return [["value"], ...v.map((x) => [cell(x)])];
  if (v && typeof v === "object") return [["key", "value"], ...Object.entries(v).map(([k, x]) => [k, cell(x)])];
  return [["value"], [cell(v)]];
}

function cell(x) {
  if (x === null || x === undefined) return "";
  return typeof x === "object" ? JSON.stringify(x) : String(x);
}

/** A sortable table of `rows` (the first is the header). */
function renderTable(rows) {
  const table = document.createElement("table");
  const [head, ...body] = rows.length ? rows : [[]];
  const thead = table.createTHead().insertRow();
  const tbody = table.createTBody();
  const fill = (data) => {
    tbody.textContent = "";
    for (const r of data) {
      const tr = tbody.insertRow();
      for (let i = 0; i < head.length; i++) tr.insertCell().textContent = r[i] ?? "";
    }
  };
  let order = { col: -1, dir: 1 };
  head.forEach((h, i) => {
    const th = document.createElement("th");
    th.textContent = h;
    th.title = "Sort";
    th.onclick = () => {
      order = { col: i, dir: order.col === i ? -order.dir : 1 };
      const num = body.every((r) => r[i] === "" || !isNaN(Number(r[i])));
      fill([...body].sort((a, b) => {
        const x = a[i] ?? "", y = b[i] ?? "";
        return order.dir * (num ? Number(x) - Number(y) : String(x).localeCompare(String(y)));
      }));
    };
    thead.append(th);
  });
  fill(body);
  return table;
}

class PreviewPane {
  /** `root` is the pane's section; `onToggle` runs when it opens or closes. */
  constructor(root) {
    this.aside = root.querySelector(".preview");
    this.splitter = root.querySelector(".splitter");
    this.body = root.querySelector(".preview-body");
    this.pick = root.querySelector(".preview-pick");
    this.raw = root.querySelector(".preview-raw");
    this.button = root.querySelector(".pane-preview");
    this.items = [];
    this.shown = null;
    root.querySelector(".preview-close").onclick = () => this.close();
    this.button.onclick = () => this.open(this.shown || this.items[this.items.length - 1]);
    this.pick.onchange = () => this.open(this.items.find((p) => p.preview_id === this.pick.value));
    this.splitter.addEventListener("mousedown", (ev) => this.drag(ev, root));
  }

  /** Forgets everything (another workstream). */
  clear() {
    this.items = [];
    this.shown = null;
    this.pick.textContent = "";
    this.close();
    this.button.classList.add("hidden");
  }

  /** Lists the stored previews of workstream `id` (the pane stays closed). */
  async load(id) {
    let r;
    try { r = await api("GET", `/api/workstreams/${id}/previews`); } catch (_) { return; }
    for (const p of r.previews) this.remember(p);
  }

  remember(p) {
    const i = this.items.findIndex((x) => x.preview_id === p.preview_id);
    if (i >= 0) this.items[i] = p; else this.items.push(p);
    this.pick.textContent = "";
    for (const x of this.items) {
      const o = document.createElement("option");
      o.value = x.preview_id;
      o.textContent = `${x.title} (${x.kind})`;
      this.pick.append(o);
    }
    this.button.classList.remove("hidden");
  }

  /** A `preview` event: remember it and show it. */
  show(p) {
    this.remember(p);
    this.open(p);
  }

  close() {
    this.aside.classList.add("hidden");
    this.splitter.classList.add("hidden");
    this.body.textContent = "";
  }

  async open(p) {
    if (!p) return;
    this.shown = p;
    this.pick.value = p.preview_id;
    this.raw.href = p.url;
    this.aside.classList.remove("hidden");
    this.splitter.classList.remove("hidden");
    this.aside.dataset.kind = p.kind;
    this.body.textContent = "";
    if (p.kind === "html") {
      const f = document.createElement("iframe");
      f.setAttribute("sandbox", "");
      f.setAttribute("referrerpolicy", "no-referrer");
      f.title = p.title;
      f.src = p.url;
      this.body.append(f);
    } else if (p.kind === "pdf") {
      const f = document.createElement("iframe");
      f.title = p.title;
      f.src = p.url;
      this.body.append(f);
    } else if (p.kind === "image") {
      const img = document.createElement("img");
      img.alt = p.title;
      img.src = p.url;
      this.body.append(img);
    } else {
      let text;
      try {
        const r = await fetch(p.url, { credentials: "same-origin" });
        if (!r.ok) throw new Error(r.statusText);
        text = await r.text();
      } catch (e) {
        const err = document.createElement("p");
        err.className = "error";
        err.textContent = "Could not load the preview: " + e.message;
        this.body.append(err);
        return;
      }
      if (this.shown !== p) return;
      if (p.kind === "markdown") {
        const d = document.createElement("div");
        d.className = "md";
        renderMarkdown(d, text);
        this.body.append(d);
      } else if (p.kind === "table") {
        let rows;
        if (p.media_type === "application/json") {
          try { rows = jsonRows(JSON.parse(text)); } catch (_) { rows = [["value"], [text]]; }
        } else {
          rows = parseDelimited(text, p.media_type === "text/tab-separated-values" ? "\t" : ",");
        }
        this.body.append(renderTable(rows));
      } else {
        const pre = document.createElement("pre");
        pre.textContent = text;
        this.body.append(pre);
      }
    }
  }

  /** Resizes the preview by dragging the splitter (per pane). */
  drag(ev, root) {
    ev.preventDefault();
    const body = root.querySelector(".pane-body");
    this.splitter.classList.add("dragging");
    // Frames swallow mouse events mid-drag; turn them off meanwhile.
    this.body.style.pointerEvents = "none";
    const move = (e) => {
      const r = body.getBoundingClientRect();
      const w = Math.min(Math.max(r.right - e.clientX, 160), r.width - 200);
      this.aside.style.width = w + "px";
    };
    const up = () => {
      this.splitter.classList.remove("dragging");
      this.body.style.pointerEvents = "";
      window.removeEventListener("mousemove", move);
      window.removeEventListener("mouseup", up);
    };
    window.addEventListener("mousemove", move);
    window.addEventListener("mouseup", up);
  }
}
