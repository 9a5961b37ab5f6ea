/**
 * A client that stops reading (the test stops this process with SIGSTOP): one `/_events` socket
 * subscribed to `jobs:*` and one SSE stream of `jobs:*`. Prints "ready" once both are live.
 */
const [gateway, apiKey] = process.argv.slice(2) as [string, string];
const ws = new WebSocket(`${gateway.replace(/^http/, 'ws')}/_events?apiKey=${apiKey}`);
let subscribed = false;
ws.onopen = () => ws.send(JSON.stringify({ type: 'subscribe', channel: 'jobs:*' }));
ws.onmessage = () => (subscribed = true);
const res = await fetch(`${gateway}/sse/jobs:*?apiKey=${apiKey}`);
const reader = res.body!.getReader();
await reader.read();
while (!subscribed) await Bun.sleep(10);
console.log('ready');
// Keep reading slowly while running; once stopped, nothing is read at all.
for (;;) {
  const r = await reader.read();
  if (r.done) break;
  await Bun.sleep(1000);
}
export {};
