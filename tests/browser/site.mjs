// A web site kept in a public container, visited with a real browser (Debian's Chromium,
// driven by playwright-core) through `ifmatch proxy`: what a user of a static site on blob
// storage meets in their first hour. Every write goes through the proxy, as the site's
// owner would make it.
//
// Usage: node tests/browser/site.mjs CONTAINER_URL
//   CONTAINER_URL: the container's URL through the proxy (anonymous writes allowed behind it)
//   CHROMIUM: the browser (default /usr/bin/chromium)
// Prints `browser through the proxy: N passed` when every check holds; exits 1 otherwise.
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';

const site = process.argv[2];
assert.ok(site, 'usage: node tests/browser/site.mjs CONTAINER_URL');
const IMAGES = 12;
const KEPT = 'public, max-age=3600';

async function put(name, type, body, cacheControl) {
  const headers = { 'x-ms-blob-type': 'BlockBlob', 'x-ms-blob-content-type': type };
  if (cacheControl) headers['x-ms-blob-cache-control'] = cacheControl;
  const response = await fetch(`${site}/${name}`, { method: 'PUT', headers, body });
  assert.equal(response.status, 201, `PUT ${name}: ${response.status} ${await response.text()}`);
}

const css = (color) => `h1 { color: ${color}; }\n`;
const page = `<!doctype html><html><head><link rel="stylesheet" href="style.css">
<script src="app.js"></script></head><body><h1 id="t">waiting</h1>
${Array.from({ length: IMAGES }, (_, i) => `<img src="img/${i}.svg" width="20">`).join('\n')}
</body></html>`;

// The site: its page with no `Cache-Control` (revalidated by every visit), the rest kept an
// hour (what a site on blob storage sets with x-ms-blob-cache-control).
const made = await fetch(`${site}?restype=container`, {
  method: 'PUT',
  headers: { 'x-ms-blob-public-access': 'blob' },
});
assert.equal(made.status, 201, `the container: ${made.status}`);
await put('style.css', 'text/css', css('rgb(200, 0, 0)'), KEPT);
await put('app.js', 'text/javascript',
  'addEventListener("DOMContentLoaded", () => { document.getElementById("t").textContent = "ran"; });\n',
  KEPT);
for (let i = 0; i < IMAGES; i++) {
  await put(`img/${i}.svg`, 'image/svg+xml',
    `<svg xmlns="http://www.w3.org/2000/svg" width="20" height="20"><rect width="20" height="20" fill="#${(i * 40503).toString(16).padStart(6, '0').slice(-6)}"/></svg>`,
    KEPT);
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--no-first-run'],
});
// The page last, once the browser is up: a cache may keep an answer with no `Cache-Control` for
// a tenth of its age when it was fetched (RFC 9111's heuristic), and a page written before a
// slow browser start (seconds on a loaded machine) would be fresh for the next visitor.
await put('index.html', 'text/html', page);

// A visit by a user with a browser cache of their own (`context`), or a new one: what the
// page shows, and the proxy's `Cache-Status` of every answer that crossed the network.
async function visit(context, how = 'goto') {
  const tab = context.pages()[0] ?? await context.newPage();
  const answers = new Map();
  const seen = (response) => {
    const path = new URL(response.url()).pathname.split('/site/')[1];
    answers.set(path, `${response.status()} ${response.headers()['cache-status'] ?? '-'}`);
  };
  tab.on('response', seen);
  if (how === 'reload') await tab.reload(); else await tab.goto(`${site}/index.html`);
  await tab.waitForLoadState('load');
  tab.off('response', seen);
  const shown = await tab.evaluate(() => ({
    text: document.getElementById('t').textContent,
    color: getComputedStyle(document.getElementById('t')).color,
    images: [...document.images].filter((i) => i.complete && i.naturalWidth > 0).length,
  }));
  return { shown, answers };
}

const rendered = (shown, color) => {
  assert.deepEqual(shown, { text: 'ran', color, images: IMAGES });
};
let passed = 0;
function check(name, body) {
  try {
    body();
    passed++;
  } catch (error) {
    console.error(`failed: ${name}\n${error.message}`);
    process.exitCode = 1;
  }
}

const first = await browser.newContext();
const one = await visit(first);
check('a first visit renders the site, each part fetched by the proxy', () => {
  rendered(one.shown, 'rgb(200, 0, 0)');
  assert.equal(one.answers.size, IMAGES + 3, [...one.answers.keys()].join(' '));
  for (const [path, answer] of one.answers) assert.match(answer, /^200 ifmatch; fwd=/, path);
});

const two = await visit(await browser.newContext());
check("another user's visit gets every kept part from the proxy's store", () => {
  rendered(two.shown, 'rgb(200, 0, 0)');
  for (const [path, answer] of two.answers) {
    if (path === 'index.html') continue;
    assert.equal(answer, '200 ifmatch; hit', path);
  }
  // The page has no Cache-Control and was written a moment ago: asked of the origin again.
  assert.match(two.answers.get('index.html'), /^200 ifmatch; fwd=/);
});

const again = await visit(first, 'reload');
check('a reload revalidates the page and still renders', () => {
  rendered(again.shown, 'rgb(200, 0, 0)');
  assert.match(again.answers.get('index.html') ?? '', /^(200|304) ifmatch; /);
});

// The owner changes the style through the proxy: the stored copy kept for an hour is
// forgotten at once, and the next visitor sees the new one.
await put('style.css', 'text/css', css('rgb(0, 0, 200)'), KEPT);
const three = await visit(await browser.newContext());
check('a write through the proxy reaches the next visitor at once', () => {
  rendered(three.shown, 'rgb(0, 0, 200)');
  assert.match(three.answers.get('style.css'), /^200 ifmatch; fwd=miss/);
  assert.equal(three.answers.get('app.js'), '200 ifmatch; hit');
});

await browser.close();
console.log(`browser through the proxy: ${passed} passed`);
