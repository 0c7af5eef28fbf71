#include "client/attention_html.h"

#include "absl/strings/str_replace.h"
#include "nlohmann/json.hpp"

namespace textgen {
namespace {

std::string EscapeHtml(const std::string& s) {
  return absl::StrReplaceAll(
      s, {{"&", "&amp;"}, {"<", "&lt;"}, {">", "&gt;"}, {"\"", "&quot;"}});
}

// The script and style, fixed; the data goes in a <script
// type="application/json">.
constexpr char kPage[] = R"html(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>@TITLE@</title>
<style>
body{font-family:sans-serif;margin:1.5em;color:#222}
.cols{display:flex;gap:4em;margin-top:1em}
.col div{font-family:"DejaVu Sans Mono",monospace;padding:1px 6px;cursor:default;white-space:pre;border-radius:2px}
table{border-collapse:collapse;margin-top:1.5em}
td{width:14px;height:14px;padding:0}
th{font:11px "DejaVu Sans Mono",monospace;font-weight:normal;padding:0 3px;white-space:pre}
th.k{writing-mode:vertical-rl;transform:rotate(180deg)}
</style></head><body>
<h3>@TITLE@</h3>
<label>layer <select id="layer"></select></label>
<label>head <select id="head"></select></label>
<span style="color:#666;margin-left:1em">hover a token: darker = more attention</span>
<div class="cols"><div class="col" id="q"><b>query</b></div><div class="col" id="k"><b>key</b></div></div>
<table id="map"></table>
<script type="application/json" id="data">@DATA@</script>
<script>
const D = JSON.parse(document.getElementById("data").textContent);
const T = D.tokens.length;
const show = t => t.replace(/\n/g, "\\n").replace(/\t/g, "\\t").replace(/ /g, "\u2423") || '""';
// The PNG's ramp: white (0) to rgb(8,48,107) (1), linear.
const colour = w => `rgb(${Math.round(255 - 247 * w)},${Math.round(255 - 207 * w)},${Math.round(255 - 148 * w)})`;
const ink = w => (w > 0.5 ? "#fff" : "#222");
const layerSel = document.getElementById("layer"), headSel = document.getElementById("head");
D.layers.forEach((l, i) => layerSel.add(new Option(l, i)));
D.heads.forEach((h, i) => headSel.add(new Option(h, i)));
const map = () => D.weights[+layerSel.value * D.heads.length + +headSel.value];
const w = (q, k) => (k > q ? 0 : map()[q * T + k]);
const cells = {q: [], k: []};
for (const side of ["q", "k"]) {
  D.tokens.forEach((t, i) => {
    const el = document.createElement("div");
    el.textContent = show(t);
    el.title = `#${i} id ${D.token_ids[i]}`;
    el.onmouseenter = () => shade(side, i);
    el.onmouseleave = clear;
    document.getElementById(side).appendChild(el);
    cells[side].push(el);
  });
}
function paint(el, v) { el.style.background = colour(v); el.style.color = ink(v); }
function clear() { for (const s of ["q", "k"]) cells[s].forEach(el => paint(el, 0)); }
// The hovered token turns amber; the other side is shaded by attention.
function shade(side, i) {
  clear();
  cells[side][i].style.background = "#fd8";
  for (let j = 0; j < T; ++j) {
    if (side === "q") paint(cells.k[j], w(i, j)); else paint(cells.q[j], w(j, i));
  }
}
function table() {
  const tab = document.getElementById("map");
  tab.innerHTML = "";
  const head = tab.insertRow();
  head.appendChild(document.createElement("th"));
  D.tokens.forEach(t => { const th = document.createElement("th"); th.className = "k"; th.textContent = show(t); head.appendChild(th); });
  for (let q = 0; q < T; ++q) {
    const row = tab.insertRow();
    const th = document.createElement("th"); th.textContent = show(D.tokens[q]); th.style.textAlign = "right"; row.appendChild(th);
    for (let k = 0; k < T; ++k) {
      const td = row.insertCell(); td.style.background = colour(w(q, k));
      td.title = `${show(D.tokens[q])} -> ${show(D.tokens[k])}: ${w(q, k).toFixed(3)}`;
    }
  }
}
layerSel.onchange = headSel.onchange = () => { clear(); table(); };
clear(); table();
</script></body></html>
)html";

}  // namespace

std::string RenderAttentionHtml(const AttentionMaps& maps,
                                const std::string& title) {
  nlohmann::json data = {{"tokens", maps.tokens},
                         {"token_ids", maps.token_ids},
                         {"layers", maps.layers},
                         {"heads", maps.heads},
                         {"weights", maps.maps}};
  // Inside <script>, "</" could end the element early; "<\/" means the same in
  // JSON. Invalid UTF-8 (never sent by the server) is replaced rather than
  // thrown on.
  const std::string json = absl::StrReplaceAll(
      data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
      {{"</", "<\\/"}});
  return absl::StrReplaceAll(
      kPage, {{"@TITLE@", EscapeHtml(title)}, {"@DATA@", json}});
}

}  // namespace textgen
