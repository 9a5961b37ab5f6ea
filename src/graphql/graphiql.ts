/**
 * The explorer page: self-contained (no CDN or other fetch at runtime), it posts to /graphql
 * with the key typed into the page, and can load the key's SDL from /schema.
 */
export const GRAPHIQL_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>svc GraphiQL</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px system-ui,sans-serif;margin:0;display:grid;grid-template-rows:auto 1fr;height:100vh}
header{display:flex;gap:8px;padding:8px;background:#222;color:#eee;align-items:center;flex-wrap:wrap}
header input{font:inherit;padding:4px;min-width:16em}
main{display:grid;grid-template-columns:1fr 1fr;gap:8px;padding:8px;min-height:0}
section{display:flex;flex-direction:column;gap:6px;min-height:0}
textarea,pre{font:13px ui-monospace,monospace;flex:1;margin:0;padding:8px;border:1px solid #ccc;border-radius:4px;overflow:auto;white-space:pre}
#variables{flex:0 0 8em}
button{font:inherit;padding:4px 12px}
</style></head>
<body>
<header><strong>svc GraphiQL</strong>
<label>x-api-key <input id="key" placeholder="pk_… or sk_…" autocomplete="off"></label>
<label>X-Project-Id <input id="project" placeholder="tenant keys only"></label>
<button id="run">Run ▶ (Ctrl+Enter)</button><button id="sdl">Schema</button></header>
<main><section><textarea id="query" spellcheck="false">{\\n  _schemaVersion\\n}</textarea>
<textarea id="variables" spellcheck="false" placeholder="variables (JSON)"></textarea></section>
<section><pre id="result"></pre></section></main>
<script>
const $ = (id) => document.getElementById(id);
$('key').value = sessionStorage.getItem('svc.key') || '';
$('project').value = sessionStorage.getItem('svc.project') || '';
function headers() {
  sessionStorage.setItem('svc.key', $('key').value); sessionStorage.setItem('svc.project', $('project').value);
  const h = { 'content-type': 'application/json', 'x-api-key': $('key').value.trim() };
  if ($('project').value.trim()) h['x-project-id'] = $('project').value.trim();
  return h;
}
async function run() {
  let variables = null;
  try { variables = $('variables').value.trim() ? JSON.parse($('variables').value) : null; }
  catch (e) { $('result').textContent = 'variables: ' + e.message; return; }
  const res = await fetch('/graphql', { method: 'POST', headers: headers(), body: JSON.stringify({ query: $('query').value, variables }) });
  const text = await res.text();
  try { $('result').textContent = JSON.stringify(JSON.parse(text), null, 2); } catch { $('result').textContent = text; }
}
$('run').onclick = run;
$('sdl').onclick = async () => { const r = await fetch('/schema', { headers: headers() }); $('result').textContent = await r.text(); };
$('query').addEventListener('keydown', (e) => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); run(); } });
</script></body></html>`;
