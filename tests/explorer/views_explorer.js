// The attention explorer's views (GET /) in headless Chromium (puppeteer-core): head view,
// model view, aggregates and rollout, export, and the link that reproduces a view; run by
// explorer_test.py --views against the shipped character model.
//
//   node views_explorer.js BASE_URL CHROMIUM SCREENSHOT_PNG
//
// Asserts (against POST /v1/attention's maps, not the page's own numbers): no console
// errors and no failed requests; the streamed tap rows are asked for and kept as u8 (as
// floats from a server that refuses that, played by intercepting the request); the head
// view draws exactly the lines of the hovered token (one per head and key of float weight
// >= 0.01, seen on the canvas just before each strong line's key, white where none goes),
// and a head switched off loses its lines; the model view has a thumbnail per layer and
// head whose entropy, sink and mean distance equal those computed here from the same u8
// bytes (how far they are from the float maps' is printed), and a click opens one; the
// layer mean and max are drawn from the mean and max of the heads; rollout rows sum to 1
// and equal rollout computed here from the float maps; the SVG export parses, has one rect
// per cell, each the canvas pixel's colour; PNG, SVG and JSON downloads arrive; the address
// bar's link opened in a fresh page shows the same pixels (heatmap and head view); the
// page's memory (JS heap and ArrayBuffers, after a collection) with a 250-token tap, four
// times its growth (the shipped model's 1,000 tokens are four such sequences) <= 50 MB; a file
// with the maps embedded (`textgen attention --html`) shows them from disk, offers no
// rollout over missing layers, and its link restores its view. Screenshots of the head
// view and the model view go beside SCREENSHOT_PNG (_head_view.png, _model_view.png).
'use strict';
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const {launch, openPage} = require('./browser');

const [baseUrl, chromium, screenshot] = process.argv.slice(2);
const shot = (suffix) => screenshot.replace(/\.png$/, `_${suffix}.png`);
const PROMPT = 'ROMEO:\nBut soft, what light through yonder';
const GENERATE = 20;
const SEED = 5;
const MIN_LINE = 0.01;  // The page's: lighter lines are not drawn.

async function apiMaps(ids) {
  const response = await fetch(baseUrl + '/v1/attention', {
    method: 'POST', headers: {'Content-Type': 'application/json'},
    body: JSON.stringify({prompt: ids})});
  assert.equal(response.status, 200);
  const att = await response.json();
  const maps = [];
  for (const m of att.maps) (maps[m.layer] = maps[m.layer] || [])[m.head] = m.weights;
  return maps;
}

// The same maps as the page gets them ("encoding": "u8"), decoded here into rows: bytes
// times "row_scales" in rows of "row_keys" weights, or (a server before per-row scales)
// byte / 255 in causal rows.
async function apiU8Maps(ids) {
  const response = await fetch(baseUrl + '/v1/attention', {
    method: 'POST', headers: {'Content-Type': 'application/json'},
    body: JSON.stringify({prompt: ids, encoding: 'u8'})});
  assert.equal(response.status, 200);
  const att = await response.json();
  const maps = [];
  for (const m of att.maps) {
    const bytes = Buffer.from(m.weights, 'base64');
    const rows = [];
    for (let r = 0, at = 0; at < bytes.length; ++r) {
      const keys = m.row_keys ? m.row_keys[r] : r + 1;
      const scale = m.row_scales ? m.row_scales[r] : 1 / 255;
      rows.push([...bytes.subarray(at, at + keys)].map((b) => b * scale));
      at += keys;
    }
    (maps[m.layer] = maps[m.layer] || [])[m.head] = rows;
  }
  return maps;
}

// What the page should compute, from the float maps (rows of numbers).
function combine(list, op) {
  return list[0].map((row, q) => row.map((_, k) => {
    const ws = list.map((m) => m[q][k]);
    return op === 'max' ? Math.max(...ws) : ws.reduce((a, b) => a + b, 0) / ws.length;
  }));
}
function rollout(maps, upTo) {
  const n = maps[0][0].length;
  const normal = (m) => m.map((row) => {
    const s = row.reduce((a, b) => a + b, 0);
    return row.map((w) => w / s);
  });
  let rolled = null;
  for (let l = 0; l <= upTo; ++l) {
    const mean = combine(maps[l], 'mean');
    const a = normal(Array.from({length: n}, (_, i) => Array.from({length: n}, (_, j) =>
        (j < mean[i].length ? 0.5 * mean[i][j] : 0) + (i === j ? 0.5 : 0))));
    rolled = rolled ? normal(a.map((row) => range(n).map((j) =>
        row.reduce((s, aik, k) => s + aik * rolled[k][j], 0)))) : a;
  }
  return rolled;
}
const range = (n) => Array.from({length: n}, (_, i) => i);
function stats(rows) {
  let entropy = 0, sink = 0, distance = 0;
  rows.forEach((row, q) => {
    row.forEach((w, k) => {
      if (w > 0) entropy -= w * Math.log(w);
      distance += w * (q - k);
    });
    sink += row[0];
  });
  return [entropy / rows.length, sink / rows.length, distance / rows.length];
}

// The pixels of a canvas, and a canvas's PNG.
const pixels = (page, id) => page.$eval('#' + id, (c) => ({
  width: c.width, data: [...c.getContext('2d').getImageData(0, 0, c.width, c.height).data]}));
const dataUrl = (page, id) => page.$eval('#' + id, (c) => c.toDataURL());

// The map drawn on #bigmap equals `rows` in the page's colour scale (u8: one step off).
async function assertBigMap(page, rows, what) {
  const {width, data} = await pixels(page, 'bigmap');
  assert.equal(width, rows.length, what);
  const want = await page.evaluate((rs) => rs.map((row) => row.map((w) => colour(w))), rows);
  for (let q = 0; q < rows.length; ++q) {
    for (let k = 0; k < rows[q].length; ++k) {
      const p = 4 * (q * width + k);
      assert.ok(want[q][k].every((v, i) => Math.abs(v - data[p + i]) <= 1),
                `${what}: cell (${q}, ${k}) is rgb(${data.slice(p, p + 3)}), ` +
                `the weight ${rows[q][k]} is rgb(${want[q][k]})`);
    }
  }
}

// The address bar once the page has written the view into it (150 ms after the last change).
async function settledUrl(page) {
  await new Promise((resolve) => setTimeout(resolve, 400));
  return page.url();
}

async function waitForDownload(dir, ext) {
  for (let i = 0; i < 100; ++i) {
    const done = fs.readdirSync(dir).filter((f) => f.endsWith('.' + ext));
    if (done.length) return fs.readFileSync(path.join(dir, done[0]));
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`no .${ext} download in ${dir}`);
}

async function main() {
  const browser = await launch(chromium);
  const downloads = fs.mkdtempSync(path.join(os.tmpdir(), 'explorer-downloads-'));
  try {
    const {page, errors} = await openPage(browser);
    await page.goto(baseUrl + '/', {waitUntil: 'networkidle0'});
    await page.waitForFunction(() => /layers ×/.test(document.getElementById('status').textContent));
    const [layers, heads] = await page.evaluate(() => [info.layers.length, info.heads.length]);

    // --- A streamed generation: its tap rows kept as typed arrays, not arrays of numbers.
    await page.$eval('#prompt', (e, v) => { e.value = v; }, PROMPT);
    await page.$eval('#max', (e, v) => { e.value = v; }, String(GENERATE));
    await page.$eval('#seed', (e, v) => { e.value = v; }, String(SEED));
    await page.click('#go');
    await page.waitForFunction(() => !document.getElementById('go').disabled &&
        document.querySelectorAll('#grid canvas').length > 0, {timeout: 60000});
    const tap = await page.evaluate(() => {
      const tapped = tokens.filter((t) => t.tap);
      return {tokens: tapped.length, rows: tapped[0].tap.map.height,
              typed: tapped.every((t) => ArrayBuffer.isView(t.tap.map.values)),
              type: tapped[0].tap.map.values.constructor.name,
              bytes: tapped.reduce((a, t) => a + t.tap.map.values.byteLength, 0)};
    });
    assert.equal(tap.tokens, GENERATE);
    assert.equal(tap.rows, layers * heads);
    assert.ok(tap.typed, 'tap rows are not typed arrays');
    assert.equal(tap.type, 'Uint8Array', 'the tap was not asked for u8 rows');
    const heap = (await page.metrics()).JSHeapUsedSize;
    console.log(`figure: tap of ${tap.tokens} tokens kept as ${tap.type}: ${tap.bytes} bytes; ` +
                `the page's JS heap ${(heap / 1e6).toFixed(1)} MB with its maps`);
    const ids = await page.evaluate(() => tokens.map((t) => t.id));
    const api = await apiMaps(ids);
    const n = ids.length;

    // --- Head view: hover a query token on the left; its lines alone are drawn.
    const L = 2;
    await page.select('#layer', String(L));
    await page.select('#view', 'head');
    assert.equal(await page.$$eval('#chips .chip', (c) => c.length), heads, 'head view chips');
    const q = n - 3;
    // Scrolls query token i of the head view into the window and moves the mouse onto it.
    const hoverHeadToken = async (i) => {
      const at = await page.evaluate((j) => {
        const c = document.getElementById('headcanvas');
        window.scrollTo(0, c.getBoundingClientRect().top + window.scrollY + hvY(j) - 400);
        const r = c.getBoundingClientRect();
        return {x: r.x + HV.column - 20, y: r.y + 1 + hvY(j)};
      }, i);
      await page.mouse.move(at.x, at.y);
    };
    const geometry = await page.evaluate(() => ({hv: HV, ys: range(tokens.length).map(hvY)}));
    await hoverHeadToken(q);
    assert.equal(await page.evaluate(() => hovered), q, 'the token hovered in the head view');
    const linesOf = () => page.evaluate(() => {
      const out = [];
      forEachLine((qq, k, w, colour, h) => out.push({q: qq, k, w, h}));
      return out;
    });
    const lines = await linesOf();
    assert.ok(lines.length > 0);
    assert.ok(lines.every((l) => l.q === q), 'a line of another token is drawn');
    // One line per head and key whose float weight is >= 0.01 (u8 rounding may move a
    // weight within 0.004 of the cut either way).
    for (let h = 0; h < heads; ++h) {
      const row = api[L][h][q];
      const drawn = new Set(lines.filter((l) => l.h === h).map((l) => l.k));
      row.forEach((w, k) => {
        if (Math.abs(w - MIN_LINE) < 0.004) return;
        assert.equal(drawn.has(k), w >= MIN_LINE, `head ${h} key ${k} weight ${w}`);
      });
    }
    // On the canvas, just before each line reaches its key (where lines to neighbouring
    // keys are ~16 pixels apart; nearer the query they fan in and overlap): coloured where
    // a strong line goes, white where none goes.
    const canvasPx = await pixels(page, 'headcanvas');
    const nearKey = (k) => {
      const x = geometry.hv.column + geometry.hv.gap - 3;
      const y = geometry.ys[q] + (geometry.ys[k] - geometry.ys[q]) * (x + 0.5 - geometry.hv.column) /
                geometry.hv.gap;
      const p = 4 * (Math.floor(y) * canvasPx.width + x);
      return canvasPx.data.slice(p, p + 3);
    };
    let strong = 0, empty = 0;
    for (let k = 0; k <= q; ++k) {
      const w = Math.max(...lines.filter((l) => l.k === k).map((l) => l.w), 0);
      if (w >= 0.3) {
        assert.ok(nearKey(k).some((c) => c < 245), `key ${k} (weight ${w}): rgb(${nearKey(k)})`);
        ++strong;
      } else if (Math.max(...api[L].map((m) => m[q][k])) < 0.005) {
        assert.deepEqual(nearKey(k), [255, 255, 255], `key ${k}: a line where none goes`);
        ++empty;
      }
    }
    assert.ok(strong > 0 && empty > 0, `${strong} strong lines, ${empty} keys without any`);
    // Switch off every head but head 1: only its lines stay.
    for (let h = 0; h < heads; ++h) {
      if (h !== 1) await page.click(`#chips .chip[data-head="${h}"]`);
    }
    await hoverHeadToken(q);
    const one = await linesOf();
    assert.ok(one.length > 0 && one.every((l) => l.h === 1 && l.q === q));
    assert.equal(one.length, lines.filter((l) => l.h === 1).length, 'head 1 alone: its lines');
    assert.equal(await page.$$eval('#chips .chip.off', (c) => c.length), heads - 1,
                 'chips switched off');
    console.log(`figure: head view, layer ${L}, query ${q}: ${lines.length} lines over ` +
                `${heads} heads (${strong} strong ones seen on the canvas, ${empty} empty ` +
                `keys white), ${one.length} with head 1 alone`);

    // --- The link reproduces the head view (heads off and the focused token included).
    const headUrl = await settledUrl(page);
    assert.match(headUrl, new RegExp(`&focus=${q}&`));
    assert.match(headUrl, /#.*view=head.*&heads=1/);
    const headPng = await dataUrl(page, 'headcanvas');
    const fresh = await openPage(browser);
    await fresh.page.goto(headUrl, {waitUntil: 'networkidle0'});
    await fresh.page.waitForFunction(() => maps && hovered >= 0 &&
        document.getElementById('view').value === 'head', {timeout: 60000});
    assert.equal(await dataUrl(fresh.page, 'headcanvas'), headPng,
                 'the head view from the link differs');
    assert.deepEqual(fresh.errors, []);
    await fresh.page.close();
    // For the picture, every head on and the focused token's lines.
    for (let h = 0; h < heads; ++h) {
      if (h !== 1) await page.click(`#chips .chip[data-head="${h}"]`);
    }
    await hoverHeadToken(q);
    await page.screenshot({path: shot('head_view'), fullPage: true});

    // --- Model view: a thumbnail with its stats per layer and head, as computed here.
    await page.mouse.move(0, 0);
    await page.select('#view', 'model');
    const model = await page.evaluate(() => [...document.querySelectorAll('#grid .thumb')].map(
        (t) => ({l: +t.firstChild.dataset.layer, h: +t.firstChild.dataset.head,
                 shown: getComputedStyle(t.querySelector('.stats')).display !== 'none',
                 stats: t.querySelector('.stats').innerText})));
    assert.equal(model.length, layers * heads);
    // The page computes them from the u8 maps it fetched: equal to this computation from
    // the same bytes to the digits shown; how far 8 bits move them from the float maps'
    // is a figure (weights under half a step read as 0).
    const u8 = await apiU8Maps(ids);
    const worst = [0, 0, 0];
    for (const t of model) {
      assert.ok(t.shown, 'the stats are hidden in the model view');
      const got = /H ([\d.]+)\s+sink ([\d.]+)\s+dist ([\d.]+)/.exec(t.stats).slice(1).map(Number);
      const want = stats(u8[t.l][t.h]), exact = stats(api[t.l][t.h]);
      [0.005, 0.005, 0.05].forEach((rounding, i) => {
        assert.ok(Math.abs(got[i] - want[i]) <= rounding + 1e-9,
                  `layer ${t.l} head ${t.h}: ${t.stats} vs ${want}`);
        worst[i] = Math.max(worst[i], Math.abs(want[i] - exact[i]));
      });
    }
    console.log(`figure: model view, ${model.length} thumbnails; stats of the u8 maps differ ` +
                `from the float maps' by at most ${worst.map((w) => w.toFixed(3)).join(', ')} ` +
                '(entropy, sink, distance)');
    await page.screenshot({path: shot('model_view'), fullPage: true});
    await page.click('#grid canvas[data-layer="3"][data-head="2"]');
    assert.equal(await page.$eval('#view', (e) => e.value), 'heatmap');
    assert.match(await page.$eval('#bigtitle', (e) => e.textContent), /^layer 3 head 2:/);
    await assertBigMap(page, api[3][2], 'opened from the model view');

    // --- Aggregates: mean and max over layer 3's heads; rollout through the last layer.
    await page.select('#agg', 'layer_mean');
    await assertBigMap(page, combine(api[3], 'mean'), 'mean over heads');
    await page.select('#agg', 'layer_max');
    await assertBigMap(page, combine(api[3], 'max'), 'max over heads');
    await page.select('#agg', 'rollout');
    await page.select('#layer', String(layers - 1));
    const rolled = await page.evaluate(() => {
      const m = currentMap();
      return range(m.height).map((r) => Array.from(m.row(r)));
    });
    const want = rollout(api, layers - 1);
    let sumOff = 0, off = 0;
    rolled.forEach((row, i) => {
      sumOff = Math.max(sumOff, Math.abs(row.reduce((a, b) => a + b, 0) - 1));
      row.forEach((w, j) => { off = Math.max(off, Math.abs(w - want[i][j])); });
    });
    assert.ok(sumOff < 1e-5, `a rollout row sums to 1 ± ${sumOff}`);
    assert.ok(off < 0.01, `rollout differs from the float maps' by ${off}`);
    console.log(`figure: rollout through layer ${layers - 1}: rows sum to 1 within ` +
                `${sumOff.toExponential(1)}, within ${off.toFixed(4)} of float maps' rollout`);

    // --- SVG export of the heatmap: a rect per cell, each the canvas's colour.
    await page.select('#agg', 'layer_mean');
    const svg = await page.evaluate(() => {
      const doc = new DOMParser().parseFromString(svgText(), 'image/svg+xml');
      const m = currentMap();
      const c = document.getElementById('bigmap');
      const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      const rects = [...doc.querySelectorAll('g.cells rect')];
      let mismatch = null, i = 0;
      for (let r = 0; r < m.height; ++r) {
        for (let k = 0; k < m.rowKeys[r]; ++k, ++i) {
          const p = 4 * (r * c.width + k);
          const pixel = `rgb(${data[p]},${data[p + 1]},${data[p + 2]})`;
          if (rects[i] && rects[i].getAttribute('fill') !== pixel && !mismatch) {
            mismatch = `cell (${r}, ${k}): svg ${rects[i].getAttribute('fill')}, canvas ${pixel}`;
          }
        }
      }
      return {error: doc.querySelector('parsererror') !== null, root: doc.documentElement.localName,
              rects: rects.length, cells: i, mismatch,
              labels: [...doc.querySelectorAll('g.queries text')].map((t) => t.textContent)};
    });
    assert.ok(!svg.error && svg.root === 'svg', 'the SVG does not parse');
    assert.equal(svg.rects, svg.cells);
    assert.equal(svg.cells, n * (n + 1) / 2);
    assert.equal(svg.mismatch, null);
    assert.equal(svg.labels[0], 'R');  // The first query token's text labels its row.
    console.log(`figure: SVG export of a ${n}-token heatmap: ${svg.rects} rects, every fill ` +
                'the canvas pixel\'s');

    // --- The downloads themselves.
    const cdp = await page.createCDPSession();
    await cdp.send('Browser.setDownloadBehavior', {behavior: 'allow', downloadPath: downloads});
    await page.click('#export-png');
    const png = await waitForDownload(downloads, 'png');
    assert.equal(png.subarray(1, 4).toString(), 'PNG');
    await page.click('#export-svg');
    assert.match((await waitForDownload(downloads, 'svg')).toString(), /^<\?xml[^]*<svg /);
    await page.click('#export-json');
    const json = JSON.parse((await waitForDownload(downloads, 'json')).toString());
    assert.equal(json.maps.length, 1);
    assert.equal(json.aggregation, 'layer_mean');
    const mean = combine(api[layers - 1], 'mean');
    json.maps[0].weights.forEach((row, i) => row.forEach((w, j) => assert.ok(
        Math.abs(w - mean[i][j]) < 0.003, `JSON cell (${i}, ${j}): ${w} vs ${mean[i][j]}`)));

    // --- The link reproduces the heatmap: same map, axes and focused token.
    await page.select('#agg', 'layer_max');
    await page.select('#layer', '1');
    const cell = await page.evaluate((i) => {
      const r = document.querySelectorAll('#tokens .tok')[i].getBoundingClientRect();
      return {x: r.x + r.width / 2, y: r.y + r.height / 2};
    }, 30);
    await page.mouse.move(cell.x, cell.y);
    const url = await settledUrl(page);
    assert.match(url, /agg=layer_max/);
    const before = await Promise.all(['bigmap', 'qaxis', 'kaxis', 'overlay'].map(
        (id) => dataUrl(page, id)));
    const again = await openPage(browser);
    await again.page.goto(url, {waitUntil: 'networkidle0'});
    await again.page.waitForFunction(() => maps && hovered === 30, {timeout: 60000});
    const after = await Promise.all(['bigmap', 'qaxis', 'kaxis', 'overlay'].map(
        (id) => dataUrl(again.page, id)));
    assert.deepEqual(after, before, 'the heatmap from the link differs');
    assert.equal(await again.page.$eval('#bigtitle', (e) => e.textContent),
                 await page.$eval('#bigtitle', (e) => e.textContent));
    assert.deepEqual(again.errors, []);
    console.log(`figure: a link of ${url.length} characters reproduced the heatmap ` +
                'pixel for pixel');

    // --- A server without the compact tap (400 for "encoding" in it, played here): the
    // page asks again for float rows and keeps them as a Float32Array.
    const older = await openPage(browser);
    await older.page.setRequestInterception(true);
    let refused = 0;
    older.page.on('request', (request) => {
      if (request.url().endsWith('/v1/completions') &&
          JSON.parse(request.postData()).attention_tap.encoding !== undefined) {
        ++refused;
        request.respond({status: 400, contentType: 'application/json',
                         body: JSON.stringify({error: {message: 'unknown field'}})});
      } else {
        request.continue();
      }
    });
    await older.page.goto(baseUrl + '/', {waitUntil: 'networkidle0'});
    await older.page.waitForFunction(
        () => /layers ×/.test(document.getElementById('status').textContent));
    await older.page.$eval('#max', (e) => { e.value = '5'; });
    await older.page.click('#go');
    await older.page.waitForFunction(() => !document.getElementById('go').disabled &&
        document.querySelectorAll('#grid canvas').length > 0, {timeout: 60000});
    assert.equal(refused, 1);
    assert.deepEqual(await older.page.evaluate(() => tokens.filter((t) => t.tap).map(
        (t) => t.tap.map.values.constructor.name)), Array(5).fill('Float32Array'));
    // The refusal itself is logged (the response and the console); nothing else is.
    assert.deepEqual(older.errors.filter((e) => !/completions: 400|status of 400/.test(e)), []);
    await older.page.close();

    // --- The page's memory with a long tap (issue 33: 1,000 tokens in <= 50 MB). The
    // shipped model's context is 256 tokens, so its 1,000 tapped tokens are four sequences of
    // 250: one is generated here, its JS heap measured after a garbage collection before and
    // after, and four times the growth stands for the four.
    const long = await openPage(browser);
    await long.page.goto(baseUrl + '/', {waitUntil: 'networkidle0'});
    await long.page.waitForFunction(
        () => /layers ×/.test(document.getElementById('status').textContent));
    const heapCdp = await long.page.target().createCDPSession();
    // The JS heap and the ArrayBuffers' backing stores, which live outside it (the u8
    // rows are typed arrays): Runtime.getHeapUsage's usedSize + backingStorageSize.
    const heapNow = async () => {
      await heapCdp.send('HeapProfiler.collectGarbage');
      const usage = await heapCdp.send('Runtime.getHeapUsage');
      return usage.usedSize + (usage.backingStorageSize || 0);
    };
    const LONG = 250;
    const idle = await heapNow();
    await long.page.$eval('#prompt', (e) => { e.value = 'ROMEO:'; });
    await long.page.$eval('#max', (e, v) => { e.value = v; }, String(LONG));
    await long.page.click('#go');
    await long.page.waitForFunction(() => !document.getElementById('go').disabled &&
        document.querySelectorAll('#grid canvas').length > 0, {timeout: 120000});
    const longTap = await long.page.evaluate(() => {
      const tapped = tokens.filter((t) => t.tap);
      return {tokens: tapped.length,
              bytes: tapped.reduce((a, t) => a + t.tap.map.values.byteLength, 0)};
    });
    const held = await heapNow();
    assert.equal(longTap.tokens, LONG);
    const grown = held - idle;
    console.log(`figure: page memory (JS heap + ArrayBuffers) ${(idle / 1e6).toFixed(1)} MB idle, ` +
                `${(held / 1e6).toFixed(1)} MB with the tap of ${longTap.tokens} tokens ` +
                `(${(longTap.bytes / 1e6).toFixed(2)} MB of u8 rows): ` +
                `+${(grown / 1e6).toFixed(1)} MB, so 1,000 tokens ~${(4 * grown / 1e6).toFixed(1)} MB`);
    assert.ok(idle + 4 * grown <= 50e6,
              `1,000 tapped tokens would take ${((idle + 4 * grown) / 1e6).toFixed(1)} MB of page memory`);
    assert.deepEqual(long.errors, []);
    await long.page.close();

    // --- A file as `textgen attention --html --layer 0,5` writes it (ExplorerPageWithData:
    // the maps in a JSON script element before the page's script), opened from disk: its
    // maps, no rollout over the missing layers, and its link restores the view.
    const html = await (await fetch(baseUrl + '/')).text();
    const att = await (await fetch(baseUrl + '/v1/attention', {
      method: 'POST', headers: {'Content-Type': 'application/json'},
      body: JSON.stringify({prompt: ids, layers: [0, 5]})})).json();
    const file = path.join(downloads, 'embedded.html');
    const at = html.indexOf('<script>');
    fs.writeFileSync(file, html.slice(0, at) + '<script type="application/json" id="data">' +
                     JSON.stringify(att).replace(/</g, '\\u003c') + '</script>\n' + html.slice(at));
    const offline = await openPage(browser);
    await offline.page.goto('file://' + file, {waitUntil: 'load'});
    assert.match(await offline.page.$eval('#status', (e) => e.textContent), /2 layers × 4 heads/);
    assert.ok(!await offline.page.$$eval('#agg option', (o) => o.some((x) => x.value === 'rollout')),
              'rollout offered over 2 of 6 layers');
    await offline.page.select('#layer', '1');
    await offline.page.select('#head', '3');
    await assertBigMap(offline.page, api[5][3], 'the file\'s layer 5 head 3');
    const fileUrl = await settledUrl(offline.page);
    assert.match(fileUrl, /#view=heatmap&layer=5&head=3/);
    const reopened = await openPage(browser);
    await reopened.page.goto(fileUrl, {waitUntil: 'load'});
    await reopened.page.waitForFunction(() => +document.getElementById('head').value === 3);
    assert.equal(await dataUrl(reopened.page, 'bigmap'), await dataUrl(offline.page, 'bigmap'));
    assert.deepEqual([...offline.errors, ...reopened.errors], []);

    assert.deepEqual(errors, [], 'console errors or failed requests');
  } finally {
    await browser.close();
    fs.rmSync(downloads, {recursive: true, force: true});
  }
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
