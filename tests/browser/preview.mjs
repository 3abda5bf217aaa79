// The preview pane in headless Chromium against the real server: the model
// opens a page, Markdown, a CSV table, an image and a PDF; each shows in the
// pane beside the chat; the page runs sandboxed (its script does not run,
// it reaches neither the parent nor the network); the pane resizes and
// comes back after a reload.
// Usage: node preview.mjs BASE_URL   (exit code 0 = pass; failures print why)
import { chromium } from "playwright-core";
import assert from "node:assert/strict";

const base = process.argv[2];
const executablePath = process.env.CHROMIUM || "/usr/bin/chromium";
const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
const failures = [];
const page = await browser.newPage();
page.on("pageerror", (e) => failures.push("page error: " + e.message));
page.on("console", (m) => {
  // The sandboxed page's blocked script and beacon are expected CSP reports.
  if (m.type() === "error" && !/status of (401|404)|Content Security Policy|sandboxed|Blocked script/.test(m.text())) {
    failures.push("console: " + m.text());
  }
});
page.on("response", (r) => { if (r.status() >= 400 && r.status() !== 401) failures.push(`${r.status()}: ${r.url()}`); });
// Anything off the server must be stopped by the browser before it leaves
// (the page's CSP); the PDF viewer is the browser's own extension.
const own = (u) => u.startsWith(base) || u.startsWith("chrome-extension://") || u.startsWith("chrome://") || u.startsWith("data:");
const outside = [];
const stopped = new Map();
page.on("response", (r) => { if (!own(r.url())) outside.push(r.url()); });
page.on("requestfailed", (r) => { if (!own(r.url())) stopped.set(r.url(), r.failure()?.errorText || ""); });
try {
  await page.goto(base + "/");
  await page.getByText("Create the first administrator").waitFor();
  await page.fill("#auth-user", "ada");
  await page.fill("#auth-display", "Ada");
  await page.fill("#auth-pass", "analytical-engine");
  await page.click("#auth-submit");
  await page.locator("#app:not(.hidden)").waitFor();
  await page.click("#new-ws");
  const pane = page.locator(".pane").first();
  await pane.locator("textarea").fill("show me everything");
  await pane.locator("textarea").press("Enter");
  await pane.locator(".msg.assistant", { hasText: "All five are open" }).waitFor({ timeout: 60000 });

  const aside = pane.locator("aside.preview");
  await aside.waitFor();
  const pick = pane.locator(".preview-pick");
  assert.equal(await pick.locator("option").count(), 5);
  // The last one opened (the PDF) is showing, in the browser's viewer.
  assert.equal(await aside.getAttribute("data-kind"), "pdf");
  const pdf = aside.locator(".preview-body iframe");
  assert.equal(await pdf.getAttribute("sandbox"), null);
  assert.match(await pdf.getAttribute("src"), /\/previews\/[0-9a-f]{32}$/);

  // The page: fully sandboxed, its script never ran, the parent untouched.
  await pick.selectOption({ label: "Quarterly report (html)" });
  const frameEl = aside.locator(".preview-body iframe");
  assert.equal(await frameEl.getAttribute("sandbox"), "");
  const handle = await frameEl.elementHandle();
  const frame = await handle.contentFrame();
  await frame.waitForLoadState();
  assert.equal((await frame.locator("h1").textContent()).trim(), "Hello preview");
  assert.equal(await frame.locator("#ran").count(), 0, "the page's script must not run");
  assert.equal(await page.evaluate(() => document.body.dataset.owned), undefined);
  // Its beacon never left: refused by the page's CSP.
  for (let i = 0; i < 50 && !stopped.has("http://203.0.113.9/beacon.png"); i++) await page.waitForTimeout(100);
  assert.match(stopped.get("http://203.0.113.9/beacon.png") || "(no request)", /^csp$|BLOCKED_BY_CSP/);

  // Markdown rendered, a CSV as a sortable table, the image.
  await pick.selectOption({ label: "notes.md (markdown)" });
  await aside.locator(".preview-body .md h2", { hasText: "Findings" }).waitFor();
  await pick.selectOption({ label: "numbers.csv (table)" });
  const firstCell = aside.locator(".preview-body tbody tr:first-child td:first-child");
  await firstCell.waitFor();
  assert.equal(await firstCell.textContent(), "carol");
  await aside.locator(".preview-body th", { hasText: "score" }).click();
  assert.equal(await firstCell.textContent(), "bob");
  await pick.selectOption({ label: "dot.png (image)" });
  const img = aside.locator(".preview-body img");
  await img.waitFor();
  await page.waitForFunction((el) => el.complete && el.naturalWidth === 1, await img.elementHandle());

  // Drag the splitter: the pane widens.
  const before = (await aside.boundingBox()).width;
  const s = await pane.locator(".splitter").boundingBox();
  await page.mouse.move(s.x + 2, s.y + 50);
  await page.mouse.down();
  await page.mouse.move(s.x - 120, s.y + 50, { steps: 5 });
  await page.mouse.up();
  const after = (await aside.boundingBox()).width;
  assert.ok(after > before + 80, `width ${before} → ${after}`);

  // Closed, then back after a reload from the stored list.
  await aside.locator(".preview-close").click();
  assert.ok(await aside.evaluate((el) => el.classList.contains("hidden")));
  await page.reload();
  await page.locator("#app:not(.hidden)").waitFor();
  const again = page.locator(".pane").first();
  await again.locator(".pane-preview:not(.hidden)").click();
  assert.equal(await again.locator(".preview-pick option").count(), 5);
  await again.locator("aside.preview:not(.hidden)").waitFor();
} catch (e) {
  failures.push(e.stack || String(e));
  try { await page.screenshot({ path: process.env.SHOT || "/tmp/turnstone-preview-failure.png" }); } catch (_) {}
}
if (outside.length) failures.push("requests outside the server: " + outside.join(", "));
await browser.close();
if (failures.length) {
  console.error(failures.join("\n"));
  process.exit(1);
}
console.log("preview ok");
