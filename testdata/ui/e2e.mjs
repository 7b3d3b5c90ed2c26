// Drives pedigree's page in a real browser (Debian's chromium through
// playwright-core), as a person would: open the one-time link, read the
// pending list, open the decision and its graph, approve once.
// Usage: node e2e.mjs LOGIN_URL DECISION_ID RECIPIENT SCREENSHOT_DIR
// Prints one JSON line of what it saw; exits non-zero on any failure.
import { chromium } from 'playwright-core';

const [link, decision, recipient, shots] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync'],
});
const seen = { consoleErrors: [], dialogs: 0 };
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  page.on('dialog', async d => { seen.dialogs++; await d.dismiss(); });   // an alert() would be a script that ran
  page.on('console', m => { if (m.type() === 'error') seen.consoleErrors.push(m.text()); });
  await page.goto(link);
  seen.pendingTitle = await page.title();
  seen.pendingShowsRecipient = (await page.content()).includes(recipient);
  await page.screenshot({ path: `${shots}/pending.png`, fullPage: true });

  await page.click(`a[href$="/decision/${decision}"] >> nth=0`);
  await page.waitForSelector('svg');
  seen.untrustedNodes = await page.locator('svg g.untrusted').count();
  seen.taintEdges = await page.locator('svg line.taint').count();
  seen.recipientRowUntrusted = await page.locator('table.args tr.untrusted', { hasText: recipient }).count();
  await page.screenshot({ path: `${shots}/decision.png`, fullPage: true });

  // The graph's untrusted root, clicked: its entry, envelope and signature.
  await page.locator('svg g.untrusted').first().click();
  await page.waitForSelector('table.facts');
  seen.entrySignature = (await page.locator('table.facts').innerText()).includes('verifies against');
  await page.screenshot({ path: `${shots}/entry.png`, fullPage: true });

  await page.click('nav a:has-text("Log")');
  await page.waitForSelector('table.log');
  await page.screenshot({ path: `${shots}/log.png`, fullPage: true });

  await page.click('nav a:has-text("Pending")');
  await page.click(`a[href$="/decision/${decision}"] >> nth=0`);
  await page.waitForSelector('svg');
  seen.sessionPath = new URL(page.url()).pathname.startsWith('/ui/s/');
  await page.click('button.approve');
  await page.waitForSelector('.flash');
  seen.flash = await page.locator('.flash').innerText();
  await page.screenshot({ path: `${shots}/approved.png`, fullPage: true });
} finally {
  await browser.close();
}
console.log(JSON.stringify(seen));
