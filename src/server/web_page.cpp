// The page at "/": one file, no build step, no external assets. It streams replies from
// /v1/chat/completions and shows each reply's attention policy, keys-read fraction and
// decode speed (from usage.magicpig). "/?autotest=TEXT" sends TEXT on load (the headless
// browser test): the reply element gets data-chunks (deltas received) and class "done".
#include "server/http_server.h"

#include "attention/registry.h"

namespace mp::server {

namespace {

// Up to the policy list.
const char* const kPageBeforePolicies = R"HTML(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>magicpig</title>
<style>
  body { font-family: system-ui, sans-serif; max-width: 50rem; margin: 1rem auto; padding: 0 1rem; color: #222; }
  header { display: flex; gap: 1rem; align-items: center; flex-wrap: wrap; }
  h1 { font-size: 1.3rem; margin: 0.5rem 0; }
  #log { border: 1px solid #ccc; border-radius: 6px; padding: 0.5rem; min-height: 20rem; overflow-y: auto; }
  .msg { white-space: pre-wrap; margin: 0.4rem 0; padding: 0.4rem 0.6rem; border-radius: 6px; }
  .user { background: #eef4ff; }
  .reply { background: #f4f4f4; }
  .stats { font-size: 0.8rem; color: #666; margin: 0 0 0.6rem 0.6rem; }
  .error { background: #fee; color: #900; }
  form { display: flex; gap: 0.5rem; margin-top: 0.5rem; }
  textarea { flex: 1; min-height: 3rem; font: inherit; }
  label { font-size: 0.9rem; }
</style>
</head>
<body>
<header>
  <h1>magicpig</h1>
  <label>attention <select id="policy">
    <option value="">server default</option>
)HTML";

// After the registry's policies (one <option> each).
const char* const kPageAfterPolicies = R"HTML(  </select></label>
  <label>max tokens <input id="max" type="number" value="256" min="1" style="width:5rem"></label>
  <label>temperature <input id="temp" type="number" value="0" min="0" max="2" step="0.1" style="width:4rem"></label>
  <label>API key <input id="key" type="password" style="width:8rem"></label>
</header>
<div id="log"></div>
<form id="form">
  <textarea id="input" placeholder="Ask something (Enter sends, Shift+Enter for a new line)"></textarea>
  <button id="send" type="submit">Send</button>
</form>
<script>
"use strict";
const log = document.getElementById("log");
const turns = [];
const keyBox = document.getElementById("key");
keyBox.value = localStorage.getItem("magicpig-key") || "";
keyBox.onchange = () => localStorage.setItem("magicpig-key", keyBox.value);

function add(cls, text) {
  const d = document.createElement("div");
  d.className = "msg " + cls;
  d.textContent = text;
  log.appendChild(d);
  log.scrollTop = log.scrollHeight;
  return d;
}

async function send(text) {
  turns.push({role: "user", content: text});
  add("user", text);
  const reply = add("reply", "");
  reply.dataset.chunks = "0";
  const stats = document.createElement("div");
  stats.className = "stats";
  log.appendChild(stats);
  const body = {messages: turns, stream: true,
                max_tokens: Number(document.getElementById("max").value),
                temperature: Number(document.getElementById("temp").value)};
  const policy = document.getElementById("policy").value;
  if (policy) body.magicpig = {attn: policy};
  const headers = {"Content-Type": "application/json"};
  if (keyBox.value) headers["Authorization"] = "Bearer " + keyBox.value;
  const t0 = performance.now();
  try {
    const res = await fetch("/v1/chat/completions", {method: "POST", headers, body: JSON.stringify(body)});
    if (!res.ok) {
      const err = await res.json().catch(() => ({error: {message: res.statusText}}));
      throw new Error(res.status + ": " + err.error.message);
    }
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buf = "", usage = null;
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buf += decoder.decode(value, {stream: true});
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const line = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data === "[DONE]") continue;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new Error(chunk.error.message);
        if (chunk.usage) usage = chunk.usage;
        const delta = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
        if (delta && delta.content) {
          reply.textContent += delta.content;
          reply.dataset.chunks = String(Number(reply.dataset.chunks) + 1);
          log.scrollTop = log.scrollHeight;
        }
      }
    }
    turns.push({role: "assistant", content: reply.textContent});
    const s = (performance.now() - t0) / 1000;
    if (usage && usage.magicpig) {
      const m = usage.magicpig;
      stats.textContent = m.attn + " · keys read " + (100 * m.keys_read_fraction).toFixed(1) + "% · " +
        m.decode_tokens_per_second.toFixed(1) + " tokens/s · " + usage.completion_tokens + " tokens in " + s.toFixed(1) + " s";
    }
    reply.classList.add("done");
  } catch (e) {
    reply.classList.add("error", "done");
    reply.textContent += "\n[" + e.message + "]";
  }
}

const input = document.getElementById("input");
document.getElementById("form").onsubmit = (ev) => {
  ev.preventDefault();
  const text = input.value.trim();
  if (!text) return;
  input.value = "";
  send(text);
};
input.addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); document.getElementById("send").click(); }
});
const auto = new URLSearchParams(location.search).get("autotest");
if (auto) {
  const p = new URLSearchParams(location.search).get("policy");
  if (p) document.getElementById("policy").value = p;
  document.getElementById("max").value = new URLSearchParams(location.search).get("max") || "16";
  send(auto);
}
</script>
</body>
</html>
)HTML";

}  // namespace

std::string index_html() {
  std::string page = kPageBeforePolicies;
  for (const attn::PolicyDesc& p : attn::policy_registry())  // names are plain [a-z-]: no escaping
    page += "    <option value=\"" + p.name + "\">" + p.name + "</option>\n";
  return page + kPageAfterPolicies;
}

}  // namespace mp::server
