// Drives the real server's UI in headless Chromium: set up the first admin,
// create a workstream, send, approve a tool call, see streamed output and the
// final answer, reload and see the same history; then sign in again.
// Usage: node ui.mjs BASE_URL   (exit code 0 = pass; failures print why)
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
// 401s are expected while signed out (whoami) and for the wrong password.
page.on("console", (m) => {
  if (m.type() === "error" && !/status of (401|404)/.test(m.text())) failures.push("console: " + m.text());
});
page.on("response", (r) => { if (r.status() === 404) failures.push("404: " + r.url()); });
const blocked = [];
page.on("request", (r) => { if (!r.url().startsWith(base)) blocked.push(r.url()); });
try {
  await page.goto(base + "/");
  await page.getByText("Create the first administrator").waitFor();
  await page.fill("#auth-user", "ada");
  await page.fill("#auth-display", "Ada");
  await page.fill("#auth-pass", "analytical-engine");
  await page.click("#auth-submit");
  await page.locator("#app:not(.hidden)").waitFor();
  assert.equal(await page.textContent("#who"), "Ada");

  await page.click("#new-ws");
  await page.locator(".tab").first().waitFor();
  const pane = page.locator(".pane").first();
  await pane.locator("textarea").fill("please list the files");
  await pane.locator("textarea").press("Enter");
  // The tool call needs approval: a card with the command and buttons.
  const card = pane.locator(".approval");
  await card.waitFor({ timeout: 30000 });
  assert.match(await card.locator(".hdr").first().textContent(), /echo streamed-from-bash/);
  // The heuristic judge's verdict and what bash may touch sit on the card.
  await card.locator('.verdict[data-tier="heuristic"]').waitFor();
  assert.match(await card.locator(".grants").textContent(), /exec bash/);
  await pane.locator(".dot.attention").waitFor();
  await card.locator("button.approve-approve").click();
  await pane.locator(".approval.resolved").waitFor();
  // Tool output streamed into its box; the final answer rendered as markdown with math.
  await pane.locator(".tool pre", { hasText: "streamed-from-bash" }).waitFor({ state: "attached", timeout: 30000 });
  // Under the tool box: what the call touched (bash was started).
  await pane.locator(".tool .capabilities li.cap-exec", { hasText: "bash" }).waitFor({ state: "attached" });
  const answer = pane.locator(".msg.assistant", { hasText: "The command printed" });
  await answer.waitFor({ timeout: 30000 });
  await answer.locator("strong", { hasText: "streamed-from-bash" }).waitFor();
  await answer.locator(".katex").first().waitFor();
  await answer.locator("pre code.hljs").first().waitFor();
  await pane.locator('[data-state="idle"]').or(pane.locator(".dot.idle")).first().waitFor();
  const before = (await pane.locator(".log").innerText()).trim();

  // Reload: same conversation from /history, same layout.
  await page.reload();
  await page.locator("#app:not(.hidden)").waitFor();
  const again = page.locator(".pane").first();
  await again.locator(".msg.assistant", { hasText: "The command printed" }).waitFor();
  await again.locator(".msg.user", { hasText: "please list the files" }).waitFor();
  await again.locator(".tool pre", { hasText: "streamed-from-bash" }).waitFor({ state: "attached" });
  await again.locator(".tool .capabilities li.cap-exec", { hasText: "bash" }).waitFor({ state: "attached" });
  const after = (await again.locator(".log").innerText()).trim();
  for (const piece of ["please list the files", "The command printed"]) {
    assert.ok(before.includes(piece) && after.includes(piece), piece);
  }

  // Attach a text file and send it with a message.
  await again.locator('input[type="file"]').setInputFiles({
    name: "notes.txt", mimeType: "text/plain", buffer: Buffer.from("remember the milk"),
  });
  await again.locator(".chip", { hasText: "notes.txt" }).waitFor();
  await again.locator("textarea").fill("summarise the file");
  await again.locator("textarea").press("Enter");
  await again.locator(".msg.user .files", { hasText: "notes.txt" }).waitFor();
  await again.locator(".msg.assistant", { hasText: "Summary: milk" }).waitFor({ timeout: 30000 });
  assert.equal(await again.locator(".chip").count(), 0);

  // Theme toggle persists.
  await page.click("#theme");
  assert.equal(await page.getAttribute("html", "data-theme"), "light");
  // Split panes (keyboard) and the layout survives a reload.
  await page.keyboard.press("Alt+s");
  assert.equal(await page.locator(".pane").count(), 2);

  // The API reference renders from /openapi.json (same-origin scripts only).
  const docs = await browser.newPage();
  docs.on("pageerror", (e) => failures.push("docs page error: " + e.message));
  await docs.goto(base + "/docs");
  await docs.locator("summary", { hasText: "/v1/api/workstreams/{ws_id}/send" }).first().waitFor();
  await docs.close();

  // Sign out, sign back in with the password.
  await page.click("#logout");
  await page.getByText("Sign in", { exact: true }).first().waitFor();
  await page.fill("#auth-user", "ada");
  await page.fill("#auth-pass", "wrong-password");
  await page.click("#auth-submit");
  await page.getByText("Invalid credentials").waitFor();
  await page.fill("#auth-pass", "analytical-engine");
  await page.click("#auth-submit");
  await page.locator("#app:not(.hidden)").waitFor();
  assert.equal(await page.getAttribute("html", "data-theme"), "light");
} catch (e) {
  failures.push(e.stack || String(e));
  try { await page.screenshot({ path: process.env.SHOT || "/tmp/turnstone-ui-failure.png" }); } catch (_) {}
}
if (blocked.length) failures.push("requests outside the server: " + blocked.join(", "));
await browser.close();
if (failures.length) {
  console.error(failures.join("\n"));
  process.exit(1);
}
console.log("ui ok");
