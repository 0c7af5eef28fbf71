// Drives the attention explorer (GET /) in headless Chromium with puppeteer-core and checks
// what a user sees; run by explorer_test.py, which starts the server and decides on skips.
//
//   node explorer.js BASE_URL CHROMIUM SCREENSHOT_PNG
//
// Asserts (node:assert; a failure exits non-zero with the reason): no console errors and no
// failed requests; a streamed generation of >= 20 tokens shows its tokens while they stream;
// hovering a token colours its attention row, and choosing a layer/head (selects and arrow
// keys) recolours the tokens and the big map, each colour equal to the page's own colour
// scale (its legend) applied to the weights POST /v1/attention returns; hovering a map cell
// marks its query and key tokens. Prints figures (first paint of the overview, bytes over
// the wire) as `figure: ...` lines.
'use strict';
const assert = require('node:assert/strict');
const {launch, parseRgb} = require('./browser');

const [baseUrl, chromium, screenshot] = process.argv.slice(2);
const GENERATE = 60;  // Tokens to generate (the issue asks for >= 20).
const SEED = 7;
// 256 characters, so 256 tokens of the character model: the size the issue measures.
const LONG_PROMPT = ('ROMEO:\nBut soft, what light through yonder window breaks?\n' +
                     'It is the east, and Juliet is the sun.\n').repeat(4).slice(0, 256);

// Weights as POST /v1/attention returns them by default (rows of numbers).
async function apiMaps(ids) {
  const response = await fetch(baseUrl + '/v1/attention', {
    method: 'POST', headers: {'Content-Type': 'application/json'},
    body: JSON.stringify({prompt: ids})});
  assert.equal(response.status, 200);
  const att = await response.json();
  const maps = {};
  for (const m of att.maps) maps[m.layer + ',' + m.head] = m.weights;
  return maps;
}

// u8 rounding (half a step of 1/255 of the row's largest weight: at most 1/510) moves a
// colour channel by at most 225 / 510 < 1.
function assertColourNear(actual, want, what) {
  assert.ok(actual.every((c, i) => Math.abs(c - want[i]) <= 1),
            `${what}: rgb(${actual}) is not the legend's rgb(${want})`);
}

async function main() {
  const browser = await launch(chromium);
  try {
    const page = await browser.newPage();
    await page.setViewport({width: 1120, height: 900});
    const consoleErrors = [], failedRequests = [];
    page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
    page.on('pageerror', (e) => consoleErrors.push(String(e)));
    page.on('requestfailed', (r) => failedRequests.push(`${r.url()}: ${r.failure().errorText}`));
    page.on('response', (r) => {
      if (r.status() >= 400) failedRequests.push(`${r.url()}: HTTP ${r.status()}`);
    });

    await page.goto(baseUrl + '/', {waitUntil: 'networkidle0'});
    await page.waitForFunction(() => /layers ×/.test(document.getElementById('status').textContent));
    const {layers, heads} = await page.evaluate(() => ({
      layers: document.getElementById('layer').options.length,
      heads: document.getElementById('head').options.length}));
    assert.ok(layers > 1 && heads > 1, `${layers} layers, ${heads} heads in the selects`);
    // No chat template here: no chat mode (chat_explorer.js has the mode itself).
    assert.equal(await page.$eval('#modes', (e) => getComputedStyle(e).display), 'none');

    // --- Streaming: record the number of generated tokens at every change of the token area.
    await page.evaluate(() => {
      window.seen = [];
      new MutationObserver(() => window.seen.push(
          document.querySelectorAll('#tokens .tok.gen').length))
          .observe(document.getElementById('tokens'), {childList: true});
    });
    await page.$eval('#max', (e, v) => { e.value = v; }, String(GENERATE));
    await page.$eval('#seed', (e, v) => { e.value = v; }, String(SEED));
    // The character model writes 60 tokens in ~30 ms, and with the tap's rows as bytes they
    // can reach the page in one read; a slow download while they stream spreads them out
    // (lifted once the last one is in, before the maps).
    await page.emulateNetworkConditions({download: 40000, upload: -1, latency: 0});
    await page.click('#go');
    await page.waitForFunction((n) => document.querySelectorAll('#tokens .tok.gen').length >= n,
                               {timeout: 60000}, GENERATE);
    await page.emulateNetworkConditions(null);
    // The end: the buttons come back and the overview is drawn.
    await page.waitForFunction(() => !document.getElementById('go').disabled &&
        document.querySelectorAll('#grid canvas').length > 0, {timeout: 60000});
    const seen = await page.evaluate(() => window.seen);
    const generated = seen[seen.length - 1];
    assert.ok(generated >= 20, `${generated} tokens generated`);
    assert.equal(generated, GENERATE);
    // Several distinct partial counts, growing: tokens appeared while the stream went on.
    const partial = [...new Set(seen.filter((n) => n > 0 && n < generated))];
    assert.ok(partial.length >= 3,
              `the token count was seen at only ${partial.length} values before the end ` +
              `(${seen.length} observations): tokens did not show while streaming`);
    assert.deepEqual(partial, [...partial].sort((a, b) => a - b));
    console.log(`figure: streamed ${generated} tokens, seen at ${partial.length} partial ` +
                'counts before the end');

    // --- The maps the API gives for the same tokens, and the page's colour scale.
    const ids = await page.evaluate(() => tokens.map((t) => t.id));
    const api = await apiMaps(ids);
    assert.equal(Object.keys(api).length, layers * heads);
    const legend = await page.evaluate(() => {
      // The legend bar is drawn with colour(); check it is the scale used below.
      const c = document.getElementById('legendbar');
      const px = c.getContext('2d').getImageData(0, 0, c.width, 1).data;
      return {first: [...px.slice(0, 3)], last: [...px.slice(-4, -1)],
              zero: colour(0), one: colour(1)};
    });
    assert.deepEqual(legend.first, legend.zero);
    assert.deepEqual(legend.last, legend.one);
    const colours = async (weights) => page.evaluate((ws) => ws.map((w) => colour(w)), weights);

    // The hovered token's row: tokens 0..q coloured by the chosen map's row q, later ones not.
    async function checkRow(q, layer, head, what) {
      const row = api[layer + ',' + head][q];
      const want = await colours(row);
      const got = await page.$$eval('#tokens .tok',
          (spans) => spans.map((s) => getComputedStyle(s).backgroundColor));
      assert.equal(got.length, ids.length);
      for (let k = 0; k < got.length; ++k) {
        const {rgb, transparent} = parseRgb(got[k]);
        if (k <= q) {
          assertColourNear(rgb, want[k], `${what}: token ${k} (weight ${row[k]})`);
        } else {
          assert.ok(transparent, `${what}: token ${k} after the query is coloured ${got[k]}`);
        }
      }
      return row;
    }
    // The big map: pixel (k, q) is cell (query q, key k).
    async function checkBigMap(layer, head, what) {
      const rows = api[layer + ',' + head];
      const pixels = await page.evaluate(() => {
        const c = document.getElementById('bigmap');
        return {n: c.width, data: [...c.getContext('2d').getImageData(0, 0, c.width, c.height).data]};
      });
      assert.equal(pixels.n, rows.length, what);
      const flat = rows.flat();
      const want = await colours(flat);
      let i = 0;
      for (let q = 0; q < rows.length; ++q) {
        for (let k = 0; k <= q; ++k, ++i) {
          const p = 4 * (q * pixels.n + k);
          assertColourNear(pixels.data.slice(p, p + 3), want[i], `${what}: cell (${q}, ${k})`);
        }
      }
      const title = await page.$eval('#bigtitle', (e) => e.textContent);
      assert.ok(title.startsWith(`layer ${layer} head ${head}:`), title);
    }
    const selected = () => page.evaluate(() => [+document.getElementById('layer').value,
                                                +document.getElementById('head').value]);

    // Hover a generated token well into the text.
    const q = ids.length - 5;
    const box = await page.evaluate((i) => {
      const r = document.querySelectorAll('#tokens .tok')[i].getBoundingClientRect();
      return {x: r.x + r.width / 2, y: r.y + r.height / 2};
    }, q);
    await page.mouse.move(box.x, box.y);
    const tip = await page.$eval('#tip', (e) => e.textContent);
    assert.ok(tip.startsWith(`query ${q} `), tip);
    const row00 = await checkRow(q, 0, 0, 'hover, layer 0 head 0');
    await checkBigMap(0, 0, 'layer 0 head 0');

    // Head, then layer, from the selects: the same token's row recoloured from that map.
    await page.select('#head', '2');
    const row02 = await checkRow(q, 0, 2, 'head 2');
    assert.notDeepEqual(row02, row00, 'heads 0 and 2 have the same row: the check proves nothing');
    await checkBigMap(0, 2, 'head select');
    await page.select('#layer', String(layers - 1));
    await checkRow(q, layers - 1, 2, 'last layer');
    await checkBigMap(layers - 1, 2, 'layer select');
    // The overview marks the chosen map.
    const marked = await page.$eval('#grid canvas.selected', (c) => c.title);
    assert.equal(marked, `layer ${layers - 1} head 2`);

    // Keys: not while a select has focus (its own arrows move it), so leave it first.
    await page.evaluate(() => document.activeElement.blur());
    const steps = [['ArrowUp', [layers - 2, 2]], ['ArrowRight', [layers - 2, 3]],
                   ['ArrowDown', [layers - 1, 3]], ['ArrowDown', [0, 3]],  // Wraps.
                   ['ArrowLeft', [0, 2]]];
    for (const [key, [l, h]] of steps) {
      await page.keyboard.press(key);
      assert.deepEqual(await selected(), [l, h], key);
      await checkRow(q, l, h, `after ${key}`);
    }
    await checkBigMap(0, 2, 'after the keys');

    // A cell of the big map: its query and key tokens are marked.
    const cell = {q: 20, k: 7};
    const cellBox = await page.evaluate((c) => {
      const r = document.getElementById('overlay').getBoundingClientRect();
      const n = tokens.length;
      return {x: r.x + (c.k + 0.5) * r.width / n, y: r.y + (c.q + 0.5) * r.height / n};
    }, cell);
    await page.mouse.move(cellBox.x, cellBox.y);
    const marks = await page.$$eval('#tokens .tok', (spans) => spans.map((s, i) =>
        s.classList.contains('query') ? 'q' + i : s.classList.contains('key') ? 'k' + i : '')
        .filter(Boolean));
    assert.deepEqual(marks, [`k${cell.k}`, `q${cell.q}`]);  // In token order.

    // Back on the token: the cell's marks go.
    await page.mouse.move(box.x, box.y);
    assert.deepEqual(await page.$$eval('#tokens .tok.key', (s) => s.length), 0);
    // For the picture, the map where that token's row is most spread out (most to see).
    let best = [0, 0], spread = -1;
    for (const [key, rows] of Object.entries(api)) {
      const s = rows[q].slice(0, q).reduce((a, b) => a + (b > 0.05), 0);
      if (s > spread) [best, spread] = [key.split(',').map(Number), s];
    }
    await page.select('#layer', String(best[0]));
    await page.select('#head', String(best[1]));
    await checkRow(q, best[0], best[1], 'the screenshot\'s');
    await page.evaluate(() => document.activeElement.blur());
    await page.mouse.move(box.x, box.y);
    await page.screenshot({path: screenshot, fullPage: true});

    // --- 256 tokens, every layer and head: first paint of the overview, bytes over the wire.
    await page.$eval('#prompt', (e, v) => { e.value = v; }, LONG_PROMPT);
    await page.evaluate(() => performance.clearMeasures('overview'));
    await page.click('#analyze');
    await page.waitForFunction(() => performance.getEntriesByName('overview').length > 0 &&
        !document.getElementById('analyze').disabled, {timeout: 60000});
    const big = await page.evaluate(() => {
      const att = performance.getEntriesByType('resource')
          .filter((e) => e.name.endsWith('/v1/attention')).pop();
      return {ms: performance.getEntriesByName('overview')[0].duration,
              tokens: tokens.length, grid: document.querySelectorAll('#grid canvas').length,
              wire: att.encodedBodySize, body: att.decodedBodySize};
    });
    assert.equal(big.tokens, 256);
    assert.equal(big.grid, layers * heads);
    console.log(`figure: first paint of the overview, 256 tokens x ${big.grid} maps: ` +
                `${Math.round(big.ms)} ms (POST /v1/attention to the next frame)`);
    console.log(`figure: /v1/attention for it: ${big.wire} bytes over the wire ` +
                `(${big.body} decoded)`);

    // --- A constraint: the answer is one of the choices, and each generated token shows
    // the share of the vocabulary the constraint masked at its step.
    await page.$eval('#prompt', (e) => { e.value = 'ROMEO:'; });
    await page.select('#ckind', 'choice');
    assert.notEqual(await page.$eval('#constraint', (e) => getComputedStyle(e).display), 'none');
    await page.$eval('#constraint', (e) => { e.value = 'yes\nno\nmaybe'; });
    await page.$eval('#max', (e) => { e.value = '10'; });
    await page.click('#go');
    await page.waitForFunction(() => !document.getElementById('go').disabled &&
        /masked/.test(document.getElementById('status').textContent), {timeout: 60000});
    const constrained = await page.$$eval('#tokens .tok.gen', (spans) => spans.map((s) => ({
      text: s.textContent, masked: s.classList.contains('masked'), title: s.title})));
    const answer = constrained.map((t) => t.text).join('');
    assert.ok(['yes', 'no', 'maybe'].includes(answer), `constrained answer "${answer}"`);
    for (const t of constrained) {
      assert.ok(t.masked, `token "${t.text}" is not marked`);
      assert.match(t.title, /constraint allowed \d+ of \d+ tokens \([0-9.]+% masked\)/);
    }
    console.log(`figure: constrained answer "${answer}": ` +
                `${constrained.map((t) => t.title.replace(/.*\(/, '(')).join(' ')}`);

    assert.deepEqual(consoleErrors, [], 'console errors');
    assert.deepEqual(failedRequests, [], 'failed requests');
  } finally {
    await browser.close();
  }
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
