// The attention explorer (GET /) with an encoder-decoder model, in headless Chromium
// (puppeteer-core); run by explorer_test.py --seq2seq, which serves the tiny random
// checkpoint of tests/testing/make_tiny_seq2seq.py.
//
//   node seq2seq_explorer.js BASE_URL CHROMIUM SCREENSHOT_PNG
//
// Asserts: no console errors and no failed requests; the kind picker appears (decoder
// self, cross, encoder self); generating from a source shows the source's tokens above
// the target's; the cross map is T_target rows by S_source columns, every pixel the page's
// colour of the weight POST /v1/attention returns for it; hovering a target token shades
// the source's tokens (its cross row); the head view draws a target token's lines to the
// source's tokens; the encoder's map is S x S over its 3 layers.
'use strict';
const assert = require('node:assert/strict');
const {launch, openPage} = require('./browser');

const [baseUrl, chromium, screenshot] = process.argv.slice(2);
const SOURCE = '3rd of March 99';
const GENERATE = 6;

async function main() {
  const browser = await launch(chromium);
  try {
    const {page, errors} = await openPage(browser);

    await page.goto(baseUrl + '/', {waitUntil: 'networkidle0'});
    await page.waitForFunction(() => /layers ×/.test(document.getElementById('status').textContent));
    assert.equal(await page.$eval('#kindlabel', (e) => e.style.display), '');
    assert.deepEqual(await page.$$eval('#kind option', (o) => o.map((x) => x.value)),
                     ['decoder_self', 'cross', 'encoder_self']);

    await page.$eval('#prompt', (e, v) => { e.value = v; }, SOURCE);
    await page.$eval('#max', (e, v) => { e.value = v; }, String(GENERATE));
    await page.$eval('#temp', (e) => { e.value = '0'; });
    await page.click('#go');
    await page.waitForFunction(() => !document.getElementById('go').disabled &&
        document.querySelectorAll('#grid canvas').length > 0, {timeout: 60000});
    const status = await page.$eval('#status', (e) => e.textContent);
    assert.ok(!/error/i.test(status), status);

    const sourceTexts = await page.$$eval('#source .tok', (s) => s.map((x) => x.textContent));
    assert.equal(sourceTexts.length, SOURCE.length);
    const targetIds = await page.evaluate(() => tokens.map((t) => t.id));
    assert.equal(targetIds.length, 1 + GENERATE);  // [BOS] + the generated tokens.

    // The cross map: rows are the target's tokens, columns the source's.
    await page.select('#kind', 'cross');
    await page.select('#layer', '1');
    await page.select('#head', '1');
    const big = await page.$eval('#bigmap', (c) => [c.width, c.height]);
    assert.deepEqual(big, [SOURCE.length, targetIds.length]);
    assert.match(await page.$eval('#bigtitle', (e) => e.textContent),
                 /^cross-attention, layer 1 head 1: .*\(rows: target, columns: source\)$/);
    const response = await fetch(baseUrl + '/v1/attention', {
      method: 'POST', headers: {'Content-Type': 'application/json'},
      body: JSON.stringify({source: SOURCE, prompt: targetIds})});
    assert.equal(response.status, 200);
    const att = await response.json();
    const cross = att.maps.find((m) => m.kind === 'cross' && m.layer === 1 && m.head === 1);
    const mismatch = await page.evaluate((rows) => {
      const c = document.getElementById('bigmap');
      const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      for (let q = 0; q < rows.length; ++q) {
        for (let k = 0; k < rows[q].length; ++k) {
          const want = colour(rows[q][k]), p = 4 * (q * c.width + k);
          // u8 rounding moves a channel by at most 225 / 510 < 1.
          if (want.some((v, i) => Math.abs(v - data[p + i]) > 1)) {
            return `cell (${q}, ${k}): rgb(${[...data.slice(p, p + 3)]}) vs rgb(${want})`;
          }
        }
      }
      return null;
    }, cross.weights);
    assert.equal(mismatch, null);

    // The address bar's link (kind, layer and head in it) shows the same map in a fresh
    // page.
    await new Promise((resolve) => setTimeout(resolve, 400));  // Written 150 ms after a change.
    assert.match(page.url(), /kind=cross/);
    const fresh = await openPage(browser);
    await fresh.page.goto(page.url(), {waitUntil: 'networkidle0'});
    await fresh.page.waitForFunction(() => maps && kind === 'cross', {timeout: 60000});
    const bigMap = (p) => p.$eval('#bigmap', (c) => c.toDataURL());
    assert.equal(await bigMap(fresh.page), await bigMap(page));
    assert.deepEqual(await fresh.page.$$eval('#source .tok', (s) => s.map((x) => x.textContent)),
                     sourceTexts);
    assert.deepEqual(fresh.errors, []);
    await fresh.page.close();

    // Hovering target token 2 shades the source's tokens by its cross row.
    const box = await page.evaluate(() => {
      const r = document.querySelectorAll('#tokens .tok')[2].getBoundingClientRect();
      return [r.x + r.width / 2, r.y + r.height / 2];
    });
    await page.mouse.move(box[0], box[1]);
    const shaded = await page.$$eval('#source .tok', (s) => s.filter(
        (x) => x.style.background !== '').length);
    assert.equal(shaded, SOURCE.length);

    // The head view of cross-attention: target tokens on the left, the source's on the
    // right; focused on target token 2, one line per head and source token it attends.
    await page.select('#view', 'head');
    const lines = await page.evaluate(() => {
      focusToken(2);
      const out = [];
      forEachLine((q, k, w, colour, h) => out.push({q, k, w, h}));
      return out;
    });
    const want = cross.weights[2].filter((w) => w >= 0.015).length;  // Of head 1's row.
    const drawn = lines.filter((l) => l.h === 1).length;
    assert.ok(drawn >= want && drawn <= cross.weights[2].filter((w) => w >= 0.005).length,
              `${drawn} lines of head 1 for ${want} weights >= 0.015`);
    assert.ok(lines.every((l) => l.q === 2 && l.k < SOURCE.length), JSON.stringify(lines[0]));
    assert.match(await page.$eval('#headtitle', (e) => e.textContent),
                 /^cross-attention, layer 1: lines/);
    await page.select('#view', 'heatmap');

    // The encoder's maps: S x S, its 3 layers.
    await page.select('#kind', 'encoder_self');
    assert.equal(await page.$$eval('#layer option', (o) => o.length), 3);
    assert.deepEqual(await page.$eval('#bigmap', (c) => [c.width, c.height]),
                     [SOURCE.length, SOURCE.length]);
    await page.select('#kind', 'cross');
    await page.screenshot({path: screenshot, fullPage: true});
    assert.deepEqual(errors, []);
    console.log(`figure: encoder-decoder explorer: ${sourceTexts.length} source x ` +
                `${targetIds.length} target tokens, cross map checked pixel by pixel`);
  } finally {
    await browser.close();
  }
}

main().catch((e) => { console.error(e); process.exit(1); });
