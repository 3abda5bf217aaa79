// Drives the plugin console in headless Chromium: disable a plugin with its
// toggle, edit a grant, install a plugin by upload and grant it after review,
// add an MCP server by form and grant it after review (it then connects).
// The Rust side (host/cli/tests/browser.rs) checks the results through the API.
// Usage: node console.mjs BASE_URL MANIFEST_PATH WASM_PATH MCP_PYTHON MCP_FIXTURE
import { chromium } from "playwright-core";
import assert from "node:assert/strict";

const [base, manifestPath, wasmPath, mcpPython, mcpFixture] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
const failures = [];
const page = await browser.newPage();
page.on("pageerror", (e) => failures.push("page error: " + e.message));
page.on("console", (m) => {
  if (m.type() === "error" && !/status of 401/.test(m.text())) failures.push("console: " + m.text());
});
const row = (name) => page.locator(`#plugin-table tbody tr[data-name="${name}"]`);
try {
  await page.goto(base + "/");
  await page.fill("#auth-user", "admin");
  await page.fill("#auth-pass", "correct-horse");
  await page.click("#auth-submit");
  await page.locator("#app:not(.hidden)").waitFor();
  await page.click("#console-toggle");
  await row("marker").waitFor();
  assert.equal(await row("marker").locator(".badge").textContent(), "loaded");
  assert.match(await row("bash").textContent(), /built-in/);

  // Toggle: disable marker.
  await row("marker").locator("input.plugin-enabled").click();
  await row("marker").locator(".badge.disabled").waitFor();

  // Grant editor: hostile requests 127.0.0.1 and has nothing; grant it.
  await row("hostile").click();
  const detail = page.locator("#plugin-detail");
  await detail.getByText("grant from: none").waitFor();
  const http = detail.locator('input[data-kind="http"][data-value="127.0.0.1"]');
  assert.equal(await http.isChecked(), false);
  await http.check();
  await detail.locator("button.grant-save").click();
  await detail.getByText("grant from: operator").waitFor();
  assert.equal(await detail.locator('input[data-kind="http"][data-value="127.0.0.1"]').isChecked(), true);
  assert.equal(await detail.locator('input[data-kind="exec"][data-value="sh"]').isChecked(), false);

  // Install by upload: reviewed before anything is granted.
  await page.setInputFiles("#install-manifest", manifestPath);
  await page.setInputFiles("#install-component", wasmPath);
  await page.click("#install-form button[type=submit]");
  await detail.getByText("Review marker_ui").waitFor();
  const req = detail.locator('input[data-kind="http"][data-value="api.example.com"]');
  assert.equal(await req.isChecked(), false, "nothing is granted before review");
  await row("marker_ui").locator(".badge.disabled").waitFor();
  await req.check();
  await detail.locator("button.grant-enable").click();
  await row("marker_ui").locator(".badge.loaded").waitFor();

  // An MCP server added by form: nothing granted until the review grants it.
  await page.fill("#mcp-name", "fx");
  await page.fill("#mcp-command", mcpPython);
  await page.fill("#mcp-args", mcpFixture + "\nstdio");
  await page.click("#mcp-form button[type=submit]");
  await detail.getByText("Review fx").waitFor();
  const exec = detail.locator('input[data-kind="exec"][data-value="python"]');
  assert.equal(await exec.isChecked(), false, "an MCP server starts with nothing granted");
  await exec.check();
  // Its working directory, virtualenv and script directory: what the
  // kernel sandbox will let it read.
  const dirs = detail.locator('input[data-kind="filesystem"]');
  assert.equal(await dirs.count(), 3, "three directories requested");
  for (const b of await dirs.all()) await b.check();
  // Processes stay sandboxed unless the operator ticks the opt-out.
  assert.equal(await detail.locator('input[data-kind="process_sandbox"]').isChecked(), false);
  await detail.locator("button.grant-enable").click();
  await row("fx").locator(".badge.connected").waitFor({ timeout: 30000 });
  assert.match(await row("fx").textContent(), /mcp/);
  await row("fx").click();
  await detail.getByText("defined in the database").waitFor();

  // The change log names the acting user.
  await page.locator("#plugin-audit li", { hasText: "plugin.install marker_ui" }).waitFor();

  // The console survives a reload (hash route).
  await page.reload();
  await row("marker_ui").waitFor();
} catch (e) {
  failures.push(e.stack || String(e));
  try { await page.screenshot({ path: process.env.SHOT || "/tmp/turnstone-console-failure.png" }); } catch (_) {}
}
await browser.close();
if (failures.length) {
  console.error(failures.join("\n"));
  process.exit(1);
}
console.log("console ok");
