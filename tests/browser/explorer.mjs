// Drives the web explorer in headless Chromium (playwright-core).
// Usage: node explorer.mjs BASE_URL [SCREENSHOT_DIR]
// Exits non-zero with a message on the first failed check.

import { chromium } from 'playwright-core';
import fs from 'node:fs';
import path from 'node:path';

const base = process.argv[2];
const shots = process.argv[3] || '';
const executablePath = process.env.PCHRONICLE_CHROMIUM || '/usr/bin/chromium';

function check(cond, msg) {
  if (!cond) throw new Error(`check failed: ${msg}`);
}

const browser = await chromium.launch({
  executablePath,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const problems = [];
try {
  const context = await browser.newContext({ acceptDownloads: true, viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('dialog', async (d) => { problems.push(`dialog opened: ${d.message()}`); await d.dismiss(); });
  // The parse-status check below asks for a 400 on purpose; Chromium logs it.
  page.on('console', (m) => {
    // The screenshot leading out of the Dataset is refused (403) on purpose.
    if (m.type() === 'error' && !m.text().includes('status of 400') && !m.text().includes('status of 403')) problems.push(`console error: ${m.text()}`);
  });
  // Nothing may leave the origin.
  page.on('request', (r) => { if (!r.url().startsWith(base) && !r.url().startsWith('blob:') && !r.url().startsWith('data:')) problems.push(`off-origin request: ${r.url()}`); });

  const ready = async () => page.waitForSelector('body[data-ready="1"]', { timeout: 60000 });
  const shot = async (name) => { if (shots) await page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: false }); };
  const go = async (hash) => {
    await page.evaluate(() => { document.body.dataset.ready = '0'; });
    await page.evaluate((h) => { location.hash = h; }, hash);
    await ready();
  };

  // 1. Overview: the datasets and the summary charts.
  await page.goto(base + '/');
  await ready();
  const cards = await page.locator('[data-testid=datasets] .card').count();
  check(cards === 1, `one dataset card, saw ${cards}`);
  await page.waitForSelector('.bars .bar', { timeout: 60000 });
  await page.waitForSelector('[data-testid=sources] tbody tr', { timeout: 60000 });
  check(await page.locator('text=run_sql').count() > 0, 'tool chart lists run_sql');
  await shot('overview');

  // 2. Runs: filter, sort, open a trajectory.
  await go('#/runs');
  const rows = await page.locator('[data-testid=runs] tbody tr').count();
  check(rows > 3, `runs table has rows (${rows})`);
  await page.locator('th', { hasText: 'Steps' }).click();
  await ready();
  await page.locator('input[aria-label="filter runs"]').fill('unicode_zh_15');
  await page.locator('button', { hasText: 'Filter' }).click();
  await ready();
  check(await page.locator('[data-testid=runs] tbody tr').count() === 1, 'filter leaves one run');
  await shot('runs');
  await page.locator('[data-testid=runs] tbody tr a').first().click();
  await ready();
  await page.waitForSelector('article.step', { timeout: 60000 });
  check(await page.locator('article.step.user').count() > 0, 'user turns shown');
  check(await page.locator('article.step.agent').count() > 0, 'assistant turns shown');
  await shot('trajectory');

  // 3. Find a Chinese term: parse status as typed, hits highlighted.
  await go('#/find');
  const box = page.locator('input[aria-label="find expression"]');
  await box.fill('a AND (');
  await page.waitForSelector('[data-testid=parse-status] .error', { timeout: 30000 });
  const parseErr = await page.locator('[data-testid=parse-status]').innerText();
  check(parseErr.includes('PC-FND-001'), `parse error shown: ${parseErr}`);
  await box.fill('数据库');
  await page.waitForSelector('[data-testid=parse-status] .ok', { timeout: 30000 });
  const status = await page.locator('[data-testid=parse-status]').innerText();
  check(status.includes('scope steps'), `scope shown: ${status}`);
  await box.press('Enter');
  await page.waitForSelector('[data-testid=hits] .hit', { timeout: 120000 });
  const marks = await page.locator('[data-testid=hits] mark').allInnerTexts();
  check(marks.length > 0 && marks.every((m) => m === '数据库'), `highlighted terms: ${JSON.stringify(marks)}`);
  const findStats = await page.locator('[data-testid=hits] [data-testid=stats]').innerText();
  check(/rows scanned · .* read · \d+ ms · peak memory \d/.test(findStats), `find statistics line: ${findStats}`);
  await shot('find');
  // The hit opens the trajectory at the step, highlighted there too.
  await page.locator('[data-testid=hits] .hit a').first().click();
  await ready();
  await page.waitForSelector('article.step mark', { timeout: 60000 });

  // 4. Hostile content is text: nothing executes, no element is created.
  await go('#/runs?q=m-html');
  await page.locator('[data-testid=runs] tbody tr a').first().click();
  await ready();
  await page.waitForSelector('article.step', { timeout: 60000 });
  await page.locator('button', { hasText: 'Expand reasoning' }).click();
  await page.locator('details summary', { hasText: 'result' }).first().click();
  await page.waitForTimeout(500);
  const pwned = await page.evaluate(() => window.__pwned);
  check(pwned === undefined, `script ran: __pwned = ${pwned}`);
  const injected = await page.evaluate(() => document.querySelectorAll('[data-testid=timeline] script, [data-testid=timeline] iframe, [data-testid=timeline] img, [data-testid=timeline] svg, [data-testid=timeline] style, [data-testid=timeline] b').length);
  check(injected === 0, `${injected} elements created from trajectory text`);
  const text = await page.locator('[data-testid=timeline]').innerText();
  check(text.includes('<script>window.__pwned = 1</script>'), 'the markup is shown as text');
  check(text.includes('<iframe src="javascript:window.__pwned=3"></iframe>'), 'iframe markup shown as text');
  check(await page.evaluate(() => getComputedStyle(document.body).display) !== 'none', 'style tag not applied');
  await shot('hostile-content');
  // One-click export of the trajectory.
  const [exp] = await Promise.all([
    page.waitForEvent('download', { timeout: 30000 }),
    page.locator('a[data-export=atif]').click(),
  ]);
  const exported = JSON.parse(fs.readFileSync(await exp.path(), 'utf8'));
  check(exported.schema_version && exported.steps.length === 2, 'ATIF export downloaded');

  // 5. A long trajectory is virtualised: far pages leave the DOM.
  await go('#/runs?q=long-session');
  await page.locator('[data-testid=runs] tbody tr a').first().click();
  await ready();
  await page.waitForSelector('article.step', { timeout: 60000 });
  await page.locator('input[aria-label="jump to step"]').fill('1999');
  await page.locator('button', { hasText: 'Go' }).click();
  await page.waitForSelector('#step-1999', { timeout: 60000 });
  await page.waitForTimeout(800);
  const inDom = await page.locator('article.step').count();
  check(inDom <= 800, `at most a few pages in the DOM, saw ${inDom}`);
  check(await page.locator('#step-0').count() === 0, 'the first page was released');
  await page.locator('input[aria-label="jump to step"]').fill('3');
  await page.locator('button', { hasText: 'Go' }).click();
  await page.waitForSelector('#step-3', { timeout: 60000 });

  // 6. Tool output reads as a terminal: lines, colours, a long output
  // collapsed until asked, a result without a call id once under its step,
  // a screenshot inside the Dataset as an image and one outside it not.
  await go('#/runs?q=term-session');
  await page.locator('[data-testid=runs] tbody tr a').first().click();
  await ready();
  await page.waitForSelector('article[data-index="3"] pre.term', { timeout: 60000 });
  const tl = (await page.locator('[data-testid=timeline] pre.term').allInnerTexts()).join('\n');
  check(!tl.includes('\\n') && !tl.includes('\\u001b') && !tl.includes('\u001b') && !tl.includes('\r'), `no escaped newlines or control codes in the page: ${JSON.stringify(tl.slice(0, 400))}`);
  check(tl.includes('Traceback (most recent call last):\n  File "/app/main.py"'), 'output lines are lines');
  check(await page.locator('article[data-index="1"] .call details.result pre.term .fg1', { hasText: 'Error' }).count() === 1, 'ANSI red rendered under its call');
  const collapsed = await page.locator('article[data-index="2"] pre.term .line').count();
  check(collapsed > 0 && collapsed <= 20, `long output collapsed to its first and last lines (${collapsed})`);
  check(await page.locator('article[data-index="2"] details.observation').count() === 1, 'a result without a call id is shown once under its step');
  check(await page.locator('article[data-index="2"] .call details.result').count() === 0, 'no empty result section under the call');
  await page.locator('article[data-index="2"] button.show-all', { hasText: 'show all 120 lines' }).click();
  await page.waitForFunction(() => document.querySelectorAll('article[data-index="2"] pre.term .line').length === 120, null, { timeout: 30000 });
  check((await page.locator('article[data-index="2"] pre.term').innerText()).includes('row 60 of the long output'), 'the whole output after show all');
  await page.waitForFunction(() => {
    const i = document.querySelector('article[data-index="3"] figure.media img');
    return i && i.complete && i.naturalWidth > 0;
  }, null, { timeout: 30000 });
  await page.waitForSelector('article[data-index="3"] .media-placeholder[data-broken="1"]', { timeout: 30000 });
  const imgs = await page.locator('article[data-index="3"] figure.media img').count();
  check(imgs === 1, `one screenshot shown as an image, saw ${imgs}`);
  check((await page.locator('article[data-index="3"] .media-placeholder[data-broken="1"]').innerText()).includes('[image: images/outside.png]'), 'the screenshot outside the Dataset is a placeholder');
  await shot('terminal-output');

  // 7. At 1400 px the runs table needs no sideways scrolling, and a long
  // model name in the charts is shown whole.
  await page.setViewportSize({ width: 1400, height: 900 });
  await go('#/runs');
  await page.waitForSelector('[data-testid=runs] tbody tr', { timeout: 60000 });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  check(overflow <= 0, `runs table wider than the window by ${overflow}px`);
  await go('#/');
  await page.waitForSelector('.bars .bar .label', { timeout: 60000 });
  const clipped = await page.evaluate(() => [...document.querySelectorAll('.bars .bar .label')]
    .filter((l) => l.textContent.includes('claude-3.7-sonnet-20250219-thinking-extended'))
    .map((l) => l.scrollWidth - l.clientWidth));
  check(clipped.length > 0 && clipped.every((d) => d <= 0), `long model names shown whole: ${JSON.stringify(clipped)}`);
  await page.setViewportSize({ width: 1280, height: 900 });

  // 8. SQL: run, see the table, download CSV.
  await go('#/sql');
  await page.locator('textarea[aria-label=SQL]').fill('SELECT step_source, count(*) AS n FROM evals.steps GROUP BY step_source ORDER BY step_source');
  await page.locator('button', { hasText: 'Run' }).click();
  await page.waitForSelector('[data-testid=sql-result] table tbody tr', { timeout: 60000 });
  const header = await page.locator('[data-testid=sql-result] th').allInnerTexts();
  check(header.join(',') === 'step_source,n', `result columns: ${header}`);
  const sqlStats = await page.locator('[data-testid=sql-result] [data-testid=stats]').innerText();
  check(/^[\d,]+ rows scanned · [\d.]+ (B|KiB|MiB) read · \d+ ms · peak memory/.test(sqlStats) && !sqlStats.startsWith('0 rows'), `SQL statistics line: ${sqlStats}`);
  await shot('sql');
  const [dl] = await Promise.all([
    page.waitForEvent('download', { timeout: 30000 }),
    page.locator('a[data-download=csv]').click(),
  ]);
  const csv = fs.readFileSync(await dl.path(), 'utf8');
  check(csv.startsWith('step_source,n\n') && csv.includes('agent,'), `CSV download: ${csv.slice(0, 200)}`);
  const [dl2] = await Promise.all([
    page.waitForEvent('download', { timeout: 30000 }),
    page.locator('a[data-download=jsonl]').click(),
  ]);
  const lines = fs.readFileSync(await dl2.path(), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  check(lines.length >= 2 && 'step_source' in lines[0], 'JSONL download');

  check(problems.length === 0, problems.join('\n'));
  console.log('browser checks passed');
} finally {
  await browser.close();
}
