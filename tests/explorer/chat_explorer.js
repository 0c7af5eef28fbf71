// The attention explorer's chat mode (GET /) in headless Chromium (puppeteer-core); run by
// explorer_test.py --chat, which serves the character model twice: with a chat template of
// its own characters (--chat_template) and without one.
//
//   node chat_explorer.js BASE_URL CHROMIUM SCREENSHOT_PNG PLAIN_BASE_URL
//
// Asserts: no console errors and no failed requests; the mode picker is hidden on the server
// without a template and shown on the one with; Send streams the answer into the page (its
// text seen growing) from POST /v1/chat/completions; the token strip then holds exactly the
// tokens POST /v1/attention returns for the same messages plus the answer (ids in order),
// the answer's tokens marked; hovering an answer token colours tokens 0..q with the page's
// colour of that row's weights; a second turn keeps the first in the list and in the
// rendered conversation; Clear empties the list.
'use strict';
const assert = require('node:assert/strict');
const {launch, openPage, parseRgb} = require('./browser');

const [baseUrl, chromium, screenshot, plainUrl] = process.argv.slice(2);
const SYSTEM = 'Thou art a king.';
const USER = 'What news from Verona?';
const USER2 = 'And Romeo?';
const GENERATE = 40;
const SEED = 3;

async function attention(messages) {
  const response = await fetch(baseUrl + '/v1/attention', {
    method: 'POST', headers: {'Content-Type': 'application/json'},
    body: JSON.stringify({messages, add_generation_prompt: false})});
  assert.equal(response.status, 200, await response.clone().text());
  return response.json();
}

async function main() {
  const browser = await launch(chromium);
  try {
    const {page, errors} = await openPage(browser);
    const ready = () => page.waitForFunction(
        () => /layers ×/.test(document.getElementById('status').textContent));

    // --- No template: no chat mode.
    await page.goto(plainUrl + '/', {waitUntil: 'networkidle0'});
    await ready();
    assert.equal(await page.$eval('#modes', (e) => getComputedStyle(e).display), 'none',
                 'the chat mode is offered by a server without a chat template');
    assert.equal(await page.$eval('#send', (e) => getComputedStyle(e).display), 'none');

    // --- With the template: the picker, and chat mode's editor instead of the prompt.
    await page.goto(baseUrl + '/', {waitUntil: 'networkidle0'});
    await ready();
    assert.notEqual(await page.$eval('#modes', (e) => getComputedStyle(e).display), 'none',
                    'no chat mode on a server with a chat template');
    await page.click('#mode-chat');
    const visible = (id) => page.$eval('#' + id, (e) => getComputedStyle(e).display !== 'none');
    assert.ok(await visible('chat') && await visible('send') && !await visible('prompt') &&
              !await visible('go'), 'chat mode shows its editor in place of the prompt');

    await page.type('#system', SYSTEM);
    await page.type('#user', USER);
    await page.$eval('#max', (e, v) => { e.value = v; }, String(GENERATE));
    await page.$eval('#seed', (e, v) => { e.value = v; }, String(SEED));
    // The answer's length at every change of the turns.
    await page.evaluate(() => {
      window.seen = [];
      new MutationObserver(() => {
        const answer = document.querySelector('#turns .turn.assistant:last-child .content');
        window.seen.push(answer ? answer.textContent.length : 0);
      }).observe(document.getElementById('turns'),
                 {childList: true, subtree: true, characterData: true});
    });
    // The character model writes 40 tokens in ~20 ms, which can reach the page in one read;
    // a slow download while the answer streams spreads them out (lifted before the maps).
    const send = async () => {
      await page.emulateNetworkConditions({download: 4000, upload: -1, latency: 0});
      await page.click('#send');
      await page.waitForFunction(() => !document.getElementById('send').disabled ||
          /^attention/.test(document.getElementById('status').textContent), {timeout: 60000});
      await page.emulateNetworkConditions(null);
      await page.waitForFunction(() => !document.getElementById('send').disabled &&
          document.querySelectorAll('#grid canvas').length > 0, {timeout: 60000});
    };
    await send();
    const status = await page.$eval('#status', (e) => e.textContent);
    assert.ok(/^conversation of \d+ tokens/.test(status), status);
    const answer = await page.$eval('#turns .turn.assistant:last-child .content',
                                    (e) => e.textContent);
    assert.ok(answer.length > 0, 'no answer in the page');
    const seen = await page.evaluate(() => window.seen);
    const partial = [...new Set(seen.filter((n) => n > 0 && n < answer.length))];
    assert.ok(partial.length >= 3, `the answer was seen at only ${partial.length} lengths ` +
              'before the end: it did not stream into the page');
    console.log(`figure: answer of ${answer.length} characters streamed, seen at ` +
                `${partial.length} partial lengths (download throttled to 4 kB/s)`);

    // --- The token strip is the rendered conversation with the answer, as the API has it.
    const messages = [{role: 'system', content: SYSTEM}, {role: 'user', content: USER},
                      {role: 'assistant', content: answer}];
    const att = await attention(messages);
    const strip = await page.evaluate(() => ({
      ids: tokens.map((t) => t.id), spans: document.querySelectorAll('#tokens .tok').length,
      gen: [...document.querySelectorAll('#tokens .tok')].map((s) => s.classList.contains('gen'))}));
    assert.equal(strip.spans, att.tokens.length, 'tokens in the strip vs POST /v1/attention');
    assert.deepEqual(strip.ids, att.tokens.map((t) => t.id));
    // The template renders "ASSISTANT: <answer>\n" last: the answer's tokens are the ones
    // before the final line break, and only they are marked.
    const n = att.tokens.length, first = n - 1 - answer.length;
    assert.equal(att.tokens.slice(first, n - 1).map((t) => t.text).join(''), answer);
    assert.deepEqual(strip.gen, strip.gen.map((_, i) => i >= first && i < n - 1),
                     'the answer\'s tokens are not the ones marked');
    console.log(`figure: rendered conversation of ${n} tokens, the answer ${answer.length}`);
    // Each message's tokens framed with its role, in order; the template's markup between.
    const frames = await page.$$eval('#tokens .msg', (ms) => ms.map((m) => ({
      role: m.classList[1], name: m.querySelector('.rolename').textContent,
      text: [...m.querySelectorAll('.tok')].map((s) => tokens[spans.indexOf(s)].text).join('')})));
    assert.deepEqual(frames, [{role: 'system', name: 'system', text: SYSTEM},
                              {role: 'user', name: 'user', text: USER},
                              {role: 'assistant', name: 'assistant', text: answer.trim()}]);

    // --- The address bar's link shows the same conversation and maps in a fresh page.
    await new Promise((resolve) => setTimeout(resolve, 400));  // Written 150 ms after a change.
    const fresh = await openPage(browser);
    await fresh.page.goto(page.url(), {waitUntil: 'networkidle0'});
    await fresh.page.waitForFunction(() => maps && document.getElementById('mode-chat').checked,
                                     {timeout: 60000});
    const shownIn = (p) => p.evaluate(() => ({
      ids: tokens.map((t) => t.id), bold: tokens.map((t) => !t.prompt),
      map: document.getElementById('bigmap').toDataURL()}));
    assert.deepEqual(await shownIn(fresh.page), await shownIn(page));
    assert.deepEqual(fresh.errors, []);
    await fresh.page.close();

    // --- Hover an answer token: its row, coloured as the page's scale maps the weights.
    const q = n - 5;
    const box = await page.evaluate((i) => {
      const r = document.querySelectorAll('#tokens .tok')[i].getBoundingClientRect();
      return {x: r.x + r.width / 2, y: r.y + r.height / 2};
    }, q);
    await page.mouse.move(box.x, box.y);
    const tip = await page.$eval('#tip', (e) => e.textContent);
    assert.ok(tip.startsWith(`query ${q} `), tip);
    const row = att.maps.find((m) => m.layer === 0 && m.head === 0).weights[q];
    const want = await page.evaluate((ws) => ws.map((w) => colour(w)), row);
    const got = await page.$$eval('#tokens .tok',
        (spans) => spans.map((s) => getComputedStyle(s).backgroundColor));
    for (let k = 0; k < n; ++k) {
      const {rgb, transparent} = parseRgb(got[k]);
      if (k <= q) {
        assert.ok(rgb.every((c, i) => Math.abs(c - want[k][i]) <= 1),
                  `token ${k}: rgb(${rgb}), the legend's rgb(${want[k]}) for ${row[k]}`);
      } else {
        assert.ok(transparent, `token ${k} after the query is coloured ${got[k]}`);
      }
    }
    // For the picture, the map where that row is most spread out (most to see).
    let best = att.maps[0], spread = -1;
    for (const m of att.maps) {
      const s = m.weights[q].slice(0, q).reduce((a, b) => a + (b > 0.05), 0);
      if (s > spread) [best, spread] = [m, s];
    }
    await page.select('#layer', String(best.layer));
    await page.select('#head', String(best.head));
    await page.evaluate(() => document.activeElement.blur());
    await page.mouse.move(box.x, box.y);
    await page.screenshot({path: screenshot, fullPage: true});

    // --- A second turn: the first kept in the list and in the rendered conversation.
    await page.type('#user', USER2);
    await send();
    const turns = await page.$$eval('#turns .turn', (ts) => ts.map((t) =>
        [t.classList.contains('user') ? 'user' : 'assistant',
         t.querySelector('.content').textContent]));
    assert.equal(turns.length, 4);
    assert.deepEqual(turns.slice(0, 3), [['user', USER], ['assistant', answer], ['user', USER2]]);
    const att2 = await attention(messages.concat([{role: 'user', content: USER2},
                                                  {role: 'assistant', content: turns[3][1]}]));
    assert.deepEqual(await page.evaluate(() => tokens.map((t) => t.id)),
                     att2.tokens.map((t) => t.id));
    assert.ok(att2.tokens.length > n);

    // --- Clear: no turns, no tokens.
    await page.click('#clear');
    assert.equal(await page.$$eval('#turns .turn', (ts) => ts.length), 0);
    assert.equal(await page.$$eval('#tokens .tok', (ts) => ts.length), 0);

    assert.deepEqual(errors, [], 'console errors or failed requests');
  } finally {
    await browser.close();
  }
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
