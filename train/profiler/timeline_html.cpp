#include "train/profiler/timeline_html.h"

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "train/profiler/profile_table.h"

namespace loom::profiler {
namespace {

using Json = nlohmann::json;

// The page around the data: plain HTML, CSS and a canvas drawn by the script below.
constexpr const char* kPageHead = R"html(<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>Loom profile</title>
<style>
body{font:13px system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;background:#f6f7f9;color:#1f2328}
header{padding:10px 16px 8px;background:#24292f;color:#fff}
header h1{font-size:16px;margin:0 0 4px;font-weight:600}
#summary{color:#d0d7de}
.legend{margin-top:6px;color:#d0d7de}.legend span{margin-right:14px;white-space:nowrap}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px;border-radius:2px}
#wrap{position:relative;margin:10px 16px 4px;border:1px solid #d0d7de;background:#fff}
canvas{display:block;width:100%;cursor:grab}
#tip{position:absolute;pointer-events:none;background:rgba(31,35,40,.94);color:#fff;padding:6px 8px;
border-radius:4px;font:12px ui-monospace,SFMono-Regular,Menlo,monospace;white-space:pre;display:none;z-index:2}
.hint{margin:0 16px;color:#656d76;font-size:12px}
h2{font-size:14px;margin:14px 16px 4px}
pre{margin:0 16px 16px;font:11px ui-monospace,SFMono-Regular,Menlo,monospace;overflow-x:auto;background:#fff;
border:1px solid #d0d7de;padding:8px}
</style></head><body>
<header><h1>Loom profile</h1><div id="summary"></div><div class="legend" id="legend"></div></header>
<div id="wrap"><canvas id="timeline"></canvas><div id="tip"></div></div>
<p class="hint">Wheel: zoom at the pointer &middot; drag: pan &middot; double-click: the whole recording
&middot; hover: details
&middot; #from=MS&amp;to=MS after the address: open on that window</p>
<h2>key_averages()</h2>
<pre id="table"></pre>
<script id="data" type="application/json">)html";

constexpr const char* kPageTail = R"html(</script>
<script>
"use strict";
const D = JSON.parse(document.getElementById("data").textContent);
const KINDS = [["op", 210], ["autograd node", 24], ["Loom range", 140], ["user range", 280], ["step", 0], ["GPU", 175]];
const ROW = 17, AXIS = 24, LABEL = 190, GAP = 6;
const canvas = document.getElementById("timeline"), ctx = canvas.getContext("2d"), tip = document.getElementById("tip");
document.getElementById("summary").textContent = D.summary;
document.getElementById("table").textContent = D.table;
document.getElementById("legend").innerHTML = KINDS.map((k, i) =>
  `<span><i style="background:${colour(i, 0)}"></i>${k[0]}</span>`).join("");

// Each track: rows for its depths, stacked under the time axis.
const tops = [];
let height = AXIS;
for (const t of D.tracks) { tops.push(height); height += (t.depth + 1) * ROW + GAP; }
// The window shown first: the whole recording, or #from=MS&to=MS in the page's address.
let t0 = 0, t1 = Math.max(D.end, 1e-3), width = 800;
{
  const h = new URLSearchParams(location.hash.slice(1)), from = parseFloat(h.get("from")), to = parseFloat(h.get("to"));
  if (from >= 0 && to > from) { t0 = from * 1e3; t1 = to * 1e3; }
}

function hash(s) { let h = 0; for (let i = 0; i < s.length; ++i) h = (h * 31 + s.charCodeAt(i)) | 0; return h >>> 0; }
function colour(kind, name) {
  const hue = KINDS[kind][1] + (name % 7) * 4 - 12;
  if (kind === 4) return `hsl(0,0%,${72 - (name % 3) * 4}%)`;
  return `hsl(${hue},${kind === 5 ? 55 : 60}%,${46 + (name % 5) * 5}%)`;
}
const nameHash = D.names.map(hash);
function x(t) { return LABEL + (t - t0) / (t1 - t0) * (width - LABEL); }
function time(us) {
  const a = Math.abs(us);
  return a >= 1e6 ? (us / 1e6).toFixed(3) + " s" : a >= 1e3 ? (us / 1e3).toFixed(3) + " ms" : us.toFixed(3) + " us";
}

function resize() {
  const dpr = window.devicePixelRatio || 1;
  width = canvas.parentElement.clientWidth;
  canvas.width = width * dpr; canvas.height = height * dpr; canvas.style.height = height + "px";
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  draw();
}

function draw() {
  ctx.clearRect(0, 0, width, height);
  ctx.font = "11px system-ui,sans-serif"; ctx.textBaseline = "middle";
  // The time axis: about eight ticks of 1, 2 or 5 times a power of ten.
  const span = t1 - t0, raw = span / 8, p = Math.pow(10, Math.floor(Math.log10(raw)));
  const step = raw / p >= 5 ? 5 * p : raw / p >= 2 ? 2 * p : p;
  ctx.fillStyle = "#656d76"; ctx.strokeStyle = "#eaeef2";
  for (let t = Math.ceil(t0 / step) * step; t <= t1; t += step) {
    const px = x(t);
    ctx.beginPath(); ctx.moveTo(px, AXIS - 4); ctx.lineTo(px, height); ctx.stroke();
    ctx.fillText(time(t), px + 3, AXIS / 2);
  }
  D.tracks.forEach((t, i) => {
    ctx.fillStyle = i % 2 ? "#ffffff" : "#f6f8fa";
    ctx.fillRect(0, tops[i], width, (t.depth + 1) * ROW + GAP);
    ctx.fillStyle = "#1f2328"; ctx.fillText(t.name, 6, tops[i] + ROW / 2, LABEL - 10);
  });
  ctx.save(); ctx.beginPath(); ctx.rect(LABEL, 0, width - LABEL, height); ctx.clip();
  for (const e of D.events) {
    const [track, ts, dur, name, kind, depth] = e;
    if (ts > t1 || ts + dur < t0) continue;
    const a = x(ts), w = Math.max(1, x(ts + dur) - a), y = tops[track] + depth * ROW;
    ctx.fillStyle = colour(kind, nameHash[name]);
    ctx.fillRect(a, y + 1, w, ROW - 2);
    if (w > 40) {
      ctx.fillStyle = kind === 4 ? "#1f2328" : "#fff";
      ctx.fillText(D.names[name], Math.max(a, LABEL) + 3, y + ROW / 2, w - 6);
    }
  }
  ctx.restore();
}

function at(mx, my) {
  const t = t0 + (mx - LABEL) / (width - LABEL) * (t1 - t0), slack = (t1 - t0) / (width - LABEL);
  for (let i = D.events.length - 1; i >= 0; --i) {
    const [track, ts, dur, , , depth] = D.events[i], y = tops[track] + depth * ROW;
    if (my >= y && my < y + ROW && t >= ts - slack && t <= ts + dur + slack) return D.events[i];
  }
  return null;
}

let drag = null;
canvas.addEventListener("wheel", ev => {
  ev.preventDefault();
  const r = canvas.getBoundingClientRect(), mx = ev.clientX - r.left;
  if (mx < LABEL) return;
  const t = t0 + (mx - LABEL) / (width - LABEL) * (t1 - t0), f = Math.exp(ev.deltaY * 0.002);
  t0 = t - (t - t0) * f; t1 = t + (t1 - t) * f;
  if (t1 - t0 < 1e-3) t1 = t0 + 1e-3;
  draw();
}, {passive: false});
canvas.addEventListener("mousedown", ev => { drag = {x: ev.clientX, t0, t1}; canvas.style.cursor = "grabbing"; });
window.addEventListener("mouseup", () => { drag = null; canvas.style.cursor = "grab"; });
window.addEventListener("mousemove", ev => {
  const r = canvas.getBoundingClientRect(), mx = ev.clientX - r.left, my = ev.clientY - r.top;
  if (drag) {
    const dt = (ev.clientX - drag.x) / (width - LABEL) * (drag.t1 - drag.t0);
    t0 = drag.t0 - dt; t1 = drag.t1 - dt; draw(); tip.style.display = "none"; return;
  }
  const e = mx >= LABEL && mx <= width && my >= 0 && my <= height ? at(mx, my) : null;
  if (!e) { tip.style.display = "none"; return; }
  const [track, ts, dur, name, kind, depth, self, inputs] = e;
  tip.textContent = `${D.names[name]}\n${KINDS[kind][0]} on ${D.tracks[track].name}\n` +
    `start ${time(ts)}\nduration ${time(dur)}` +
    (self >= 0 ? `\nself ${time(self)}` : "") + (inputs >= 0 ? `\ninputs ${D.names[inputs]}` : "");
  tip.style.display = "block";
  tip.style.left = Math.min(mx + 14, width - tip.offsetWidth - 4) + "px"; tip.style.top = (my + 14) + "px";
});
canvas.addEventListener("dblclick", () => { t0 = 0; t1 = Math.max(D.end, 1e-3); draw(); });
window.addEventListener("resize", resize);
resize();
</script></body></html>
)html";

double micros(int64_t ns) { return double(ns) / 1e3; }

}  // namespace

std::string timeline_html(const Analysis& a) {
  const Recording& r = a.recording;
  const std::vector<EventStats>& stats = a.stats;
  Json names = Json::array(), tracks = Json::array(), events = Json::array();
  std::map<std::string, size_t> name_index;
  const auto intern_name = [&](const std::string& s) {
    auto [it, added] = name_index.emplace(s, names.size());
    if (added) names.push_back(s);
    return it->second;
  };
  std::vector<int> thread_depth(r.threads.size(), 0);
  for (size_t i = 0; i < r.events.size(); ++i)
    thread_depth[r.events[i].thread] = std::max(thread_depth[r.events[i].thread], stats[i].depth);
  for (size_t t = 0; t < r.threads.size(); ++t)
    tracks.push_back({{"name", r.threads[t].name}, {"depth", thread_depth[t]}});
  std::map<std::pair<int, uint64_t>, size_t> gpu_track;
  for (const Event& e : r.events) {
    if (!e.has_gpu_time() || gpu_track.count({e.device.index, e.stream})) continue;
    gpu_track.emplace(std::make_pair(e.device.index, e.stream), tracks.size());
    tracks.push_back(
        {{"name", "GPU " + std::to_string(e.device.index) + (e.stream == 0 ? " default stream" : " stream")},
         {"depth", 0}});
  }
  for (size_t i = 0; i < r.events.size(); ++i) {
    const Event& e = r.events[i];
    const size_t name = intern_name(display_name(e));
    const int64_t inputs = e.input_shapes.empty() ? -1 : int64_t(intern_name(e.input_shapes));
    events.push_back({e.thread, micros(e.begin_ns - r.begin_ns), micros(e.duration_ns()), name, int(e.kind),
                      stats[i].depth, micros(stats[i].self_cpu_ns), inputs});
    if (e.has_gpu_time())
      events.push_back({gpu_track.at({e.device.index, e.stream}), micros(e.gpu_begin_ns - r.begin_ns),
                        micros(e.gpu_end_ns - e.gpu_begin_ns), name, 5, 0, -1, inputs});
  }
  const KeyAverages averages(a, false);
  char summary[256];
  int n = std::snprintf(summary, sizeof summary, "%zu events on %zu thread%s over %.3f ms", r.events.size(),
                        r.threads.size(), r.threads.size() == 1 ? "" : "s", double(r.end_ns - r.begin_ns) / 1e6);
  if (averages.steps().steps > 0)
    std::snprintf(summary + n, sizeof summary - size_t(n),
                  "; %lld steps, %.1f%% of their wall time inside named events",
                  static_cast<long long>(averages.steps().steps), 100.0 * averages.steps().fraction());
  const Json data = {{"summary", summary},
                     {"table", averages.table({.sort_by = "self_cpu_time_total", .row_limit = 40})},
                     {"end", micros(r.end_ns - r.begin_ns)},
                     {"names", names},
                     {"tracks", tracks},
                     {"events", events}};
  // Inside <script>, "</" could end the element: JSON may write it as "<\/".
  std::string json = data.dump(-1, ' ', false, Json::error_handler_t::replace);
  for (size_t at = json.find("</"); at != std::string::npos; at = json.find("</", at + 3)) json.replace(at, 2, "<\\/");
  return kPageHead + json + kPageTail;
}

}  // namespace loom::profiler
