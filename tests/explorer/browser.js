// What the explorer's browser tests share: headless Chromium through puppeteer-core (the
// npm package in tests/npm), a page that records every console error, page error, failed
// request and HTTP error status, and the page's CSS colours read back as numbers.
'use strict';
const assert = require('node:assert/strict');
const path = require('node:path');
const puppeteer = require(path.join(__dirname, '..', 'npm', 'node_modules', 'puppeteer-core'));

// Root in a container: Chromium's sandbox needs user namespaces it may not have.
function launch(chromium) {
  return puppeteer.launch({
    executablePath: chromium, headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
  });
}

// A new 1120 x 900 page, and the list its errors are pushed to as they happen.
async function openPage(browser) {
  const page = await browser.newPage();
  await page.setViewport({width: 1120, height: 900});
  const errors = [];
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('requestfailed', (r) => errors.push(`${r.url()}: ${r.failure().errorText}`));
  page.on('response', (r) => { if (r.status() >= 400) errors.push(`${r.url()}: ${r.status()}`); });
  return {page, errors};
}

// "rgb(1, 2, 3)" or "rgba(1, 2, 3, 0)" as {rgb: [1, 2, 3], transparent}.
function parseRgb(css) {
  const m = /rgba?\((\d+), (\d+), (\d+)(?:, ([\d.]+))?\)/.exec(css);
  assert.ok(m, css);
  return {rgb: [+m[1], +m[2], +m[3]], transparent: m[4] === '0'};
}

module.exports = {launch, openPage, parseRgb};
