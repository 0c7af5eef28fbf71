// The attention explorer (GET /) on a long prompt, in headless Chromium (puppeteer-core):
// a 4,096-token prompt of a 24-layer × 14-head random-weight model (tools/make_checkpoint.py
// --preset attention-24x14, with the character model's vocabulary); run by
// explorer_test.py --overview, which makes the model.
//
//   node overview_explorer.js BASE_URL CHROMIUM SCREENSHOT_PNG
//
// Asserts: no console errors and no failed requests; "Prompt only" on 4,096 tokens shows a
// pooled overview of every layer and head as the model view (24 × 14 thumbnails, each the
// colours of POST /v1/attention's overview of that head, with the server's summaries under
// it); opening one and dragging over its cells fetches that query × key range of the layer
// and head at full resolution, every pixel the colour of the API's float weights there;
// choosing another head zooms into the same range of it; the address bar's link opened in
// a fresh page shows the same tile. Prints how long the overview and a tile take to reach
// the screen (request to the next frame), the first band of rows of every map too (the
// overview streams as the server's pass computes it), and the bytes of the overview over
// the wire.
// Screenshots: the overview with a drag under way (SCREENSHOT_PNG), the zoomed tile
// (_zoomed.png beside it), the overview while it streams in (_streaming.png).
'use strict';
const assert = require('node:assert/strict');
const {launch, openPage} = require('./browser');

const [baseUrl, chromium, screenshot] = process.argv.slice(2);
const TOKENS = 4096;
const TEXT = ('ROMEO:\nBut soft, what light through yonder window breaks?\n' +
              'It is the east, and Juliet is the sun.\n').repeat(50).slice(0, TOKENS);

async function attention(body) {
  const response = await fetch(baseUrl + '/v1/attention', {
    method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)});
  assert.equal(response.status, 200, await response.clone().text());
  return response.json();
}

// Every cell of #bigmap is the page's colour of `weight(r, c)` (undefined: a cell the map
// leaves out, drawn light grey); u8 rounding moves a channel by at most one step.
async function assertBigMap(page, rows, what) {
  const mismatch = await page.evaluate((rs) => {
    const c = document.getElementById('bigmap');
    const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    if (c.height !== rs.length) return `${c.height} rows drawn, ${rs.length} wanted`;
    for (let r = 0; r < rs.length; ++r) {
      for (let k = 0; k < rs[r].length; ++k) {
        const want = colour(rs[r][k]), p = 4 * (r * c.width + k);
        if (want.some((v, i) => Math.abs(v - data[p + i]) > 1)) {
          return `cell (${r}, ${k}): rgb(${[...data.slice(p, p + 3)]}) vs rgb(${want})`;
        }
      }
    }
    return null;
  }, rows);
  assert.equal(mismatch, null, what);
}

// The rows of a map of a u8 reply: bytes × row_scales in rows of row_keys.
function u8Rows(m) {
  const bytes = Buffer.from(m.weights, 'base64'), rows = [];
  for (let r = 0, at = 0; r < m.row_keys.length; at += m.row_keys[r++]) {
    rows.push([...bytes.subarray(at, at + m.row_keys[r])].map((b) => b * m.row_scales[r]));
  }
  return rows;
}

async function main() {
  const browser = await launch(chromium);
  try {
    const {page, errors} = await openPage(browser);
    await page.goto(baseUrl + '/', {waitUntil: 'networkidle0'});
    await page.waitForFunction(() => /layers ×/.test(document.getElementById('status').textContent));
    const [layers, heads] = await page.evaluate(() => [info.layers.length, info.heads.length]);
    assert.deepEqual([layers, heads], [24, 14]);

    // --- The overview: every layer and head, pooled, as the model view.
    await page.$eval('#prompt', (e, v) => { e.value = v; }, TEXT);
    await page.click('#analyze');
    await page.waitForFunction(() => performance.getEntriesByName('overview').length > 0 &&
        !document.getElementById('analyze').disabled, {timeout: 120000});
    const shown = await page.evaluate(() => {
      const reply = performance.getEntriesByType('resource')
          .filter((e) => e.name.endsWith('/v1/attention')).pop();
      const first = performance.getEntriesByName('overview_first');
      return {ms: performance.getEntriesByName('overview')[0].duration,
              firstMs: first.length ? first[0].duration : null, tokens: tokens.length,
              view: document.getElementById('view').value,
              thumbs: document.querySelectorAll('#grid canvas').length,
              step: [maps[0][0].queryStep, maps[0][0].keyStep],
              wire: reply.encodedBodySize, body: reply.decodedBodySize,
              stats: [...document.querySelectorAll('#grid .stats')].map((s) => s.innerText)};
    });
    assert.equal(shown.tokens, TOKENS);
    assert.equal(shown.view, 'model');
    assert.equal(shown.thumbs, layers * heads);
    assert.ok(shown.step[0] > 1 && shown.step[1] > 1, `not pooled: ${shown.step}`);
    console.log(`figure: overview of ${layers} x ${heads} maps of ${TOKENS} tokens ` +
                `(${shown.step[0]} x ${shown.step[1]} tokens a cell) on screen in ` +
                `${Math.round(shown.ms)} ms; ${shown.wire} bytes over the wire ` +
                `(${shown.body} decoded)`);
    // Streamed in bands: every map's first rows were on screen before the pass ended.
    assert.ok(shown.firstMs !== null, 'no band was drawn before the whole overview');
    assert.ok(shown.firstMs < shown.ms / 2,
              `first band at ${shown.firstMs} ms, the whole at ${shown.ms} ms`);
    console.log(`figure: the first band of every map on screen in ` +
                `${Math.round(shown.firstMs)} ms`);

    // The same overview from the API: each thumbnail its colours, its stats the summaries.
    const ids = await page.evaluate(() => tokens.map((t) => t.id));
    const overview = await attention({prompt: ids, encoding: 'u8', summary: true,
                                      overview: {cells: 64, pooling: 'max'}});
    assert.equal(overview.maps.length, layers * heads);
    const summary = overview.summaries.find((s) => s.layer === 7 && s.head === 5);
    assert.equal(shown.stats[7 * heads + 5].replace(/\s+/g, ' '),
                 `H ${summary.entropy.toFixed(2)} sink ${summary.sink.toFixed(2)} ` +
                 `dist ${summary.mean_distance.toFixed(1)}`);
    await page.click('#grid canvas[data-layer="7"][data-head="5"]');
    assert.equal(await page.$eval('#view', (e) => e.value), 'heatmap');
    await assertBigMap(page, u8Rows(overview.maps.find((m) => m.layer === 7 && m.head === 5)),
                       'the overview of layer 7 head 5');

    // --- Drag over cells: that range at full resolution.
    const box = await page.$eval('#overlay', (c) => {
      c.scrollIntoView({block: 'center'});  // Below 4,096 tokens' strip.
      const r = c.getBoundingClientRect();
      return {x: r.x, y: r.y, w: r.width, h: r.height, cells: [c.height, c.width]};
    });
    const at = (r, c) => [box.x + (c + 0.5) * box.w / box.cells[1],
                          box.y + (r + 0.5) * box.h / box.cells[0]];
    await page.mouse.move(...at(40, 30));
    await page.mouse.down();
    await page.mouse.move(...at(42, 32), {steps: 3});
    await page.screenshot({path: screenshot, fullPage: false,
                           clip: await page.$eval('#maps', (e) => {
                             const r = e.getBoundingClientRect();
                             return {x: 0, y: r.y + window.scrollY - 40, width: 1120,
                                     height: r.height + 50};
                           })});
    await page.evaluate(() => performance.clearMeasures('zoom'));
    await page.mouse.up();
    await page.waitForFunction(() => performance.getEntriesByName('zoom').length > 0,
                               {timeout: 60000});
    const zoomed = await page.evaluate(() => ({
      ms: performance.getEntriesByName('zoom')[0].duration, queries: zoom.queries,
      keys: zoom.keys, title: document.getElementById('bigtitle').textContent}));
    const step = shown.step;
    assert.deepEqual(zoomed.queries, [40 * step[0], 43 * step[0]]);
    assert.deepEqual(zoomed.keys, [30 * step[1], 33 * step[1]]);
    assert.match(zoomed.title, /^layer 7 head 5: .*queries \d+–\d+, keys \d+–\d+$/);
    console.log(`figure: a zoomed tile of ${zoomed.queries[1] - zoomed.queries[0]} x ` +
                `${zoomed.keys[1] - zoomed.keys[0]} tokens on screen in ${Math.round(zoomed.ms)} ms`);
    const floats = async (l, h) => (await attention({
      prompt: ids, layers: [l], heads: [h], queries: zoomed.queries, keys: zoomed.keys}))
        .maps[0].weights;
    await assertBigMap(page, await floats(7, 5), 'the zoomed tile of layer 7 head 5');
    // Weights near 1/4,096 are white on 0–1: for the picture, colours to the tile's largest.
    await page.click('#scalemax');
    await page.screenshot({path: screenshot.replace(/\.png$/, '_zoomed.png'), fullPage: false,
                           clip: await page.$eval('#maps', (e) => {
                             const r = e.getBoundingClientRect();
                             return {x: 0, y: r.y + window.scrollY - 40, width: 1120,
                                     height: r.height + 50};
                           })});

    // Another head: the same range of it.
    await page.click('#scalemax');
    await page.evaluate(() => performance.clearMeasures('zoom'));
    await page.select('#head', '9');
    await page.waitForFunction(() => performance.getEntriesByName('zoom').length > 0 &&
                               zoom.head === 9, {timeout: 60000});
    await assertBigMap(page, await floats(7, 9), 'the zoomed tile of layer 7 head 9');

    // --- The link: the same tile in a fresh page.
    await new Promise((resolve) => setTimeout(resolve, 400));  // Written 150 ms after a change.
    assert.match(page.url(), /&zoom=\d+-\d+%2C\d+-\d+/);
    const fresh = await openPage(browser);
    await fresh.page.goto(page.url(), {waitUntil: 'networkidle0', timeout: 120000});
    await fresh.page.waitForFunction(() => zoom && zoom.head === 9 &&
        performance.getEntriesByName('zoom').length > 0, {timeout: 120000});
    const png = (p) => p.$eval('#bigmap', (c) => c.toDataURL());
    assert.equal(await png(fresh.page), await png(page), 'the tile from the link differs');
    assert.deepEqual(fresh.errors, []);

    // --- The overview streaming in: the same prompt again, a picture taken once a
    // third of every map is drawn (_streaming.png), while the pass goes on. The first
    // page in front again (a page behind another draws no frames).
    await fresh.page.close();
    await page.bringToFront();
    await page.evaluate(() => performance.clearMeasures());
    await page.click('#analyze');
    await page.waitForFunction(() => {
      const band = /first (\d+) queries/.exec(document.getElementById('status').textContent);
      return (band && +band[1] >= 1365) || performance.getEntriesByName('overview').length;
    }, {timeout: 120000, polling: 'mutation'});
    await page.screenshot({path: screenshot.replace(/\.png$/, '_streaming.png'),
                           fullPage: false,
                           clip: await page.$eval('#maps', (e) => {
                             const r = e.getBoundingClientRect();
                             return {x: 0, y: r.y + window.scrollY - 40, width: 1120,
                                     height: r.height + 50};
                           })});
    const midway = await page.evaluate(() => performance.getEntriesByName('overview').length);
    console.log(`figure: streaming screenshot taken ${midway ? 'after' : 'before'} the ` +
                'whole overview was drawn');
    await page.waitForFunction(() => performance.getEntriesByName('overview').length > 0 &&
        !document.getElementById('analyze').disabled, {timeout: 120000});

    assert.deepEqual(errors, [], 'console errors or failed requests');
  } finally {
    await browser.close();
  }
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
