import { useEffect, useState } from 'preact/hooks';
import { csrfToken } from './api.ts';

/**
 * A gateway channel (`changes:<model>`, `jobs:*`, …) over `/_events`, authenticated by the
 * session cookie with its CSRF token and the project as query parameters. Calls `onEvent`
 * (debounced) for each delivered event; reconnects after a drop. Returns whether it is live.
 */
export function useChannel(projectId: string, channel: string, onEvent: () => void, debounceMs = 150): boolean {
  const [live, setLive] = useState(false);
  useEffect(() => {
    const meta = document.querySelector('meta[name="svc-studio"]')?.getAttribute('content');
    const rt = meta ? (JSON.parse(meta) as { realtimeUrl: string }).realtimeUrl : '';
    if (!rt) return;
    let ws: WebSocket | undefined;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let retry: ReturnType<typeof setTimeout> | undefined;
    let closed = false;
    const open = () => {
      ws = new WebSocket(`${rt}/_events?${new URLSearchParams({ projectId, csrf: csrfToken() })}`);
      ws.onopen = () => ws!.send(JSON.stringify({ type: 'subscribe', channel }));
      ws.onmessage = (m) => {
        const f = JSON.parse(String(m.data)) as { type?: string; channel?: string; event?: string };
        if (f.type === 'subscribed') setLive(true);
        if (f.event) {
          if (timer) clearTimeout(timer);
          timer = setTimeout(onEvent, debounceMs);
        }
      };
      ws.onclose = () => {
        setLive(false);
        if (!closed) retry = setTimeout(open, 3000);
      };
    };
    open();
    return () => {
      closed = true;
      if (timer) clearTimeout(timer);
      if (retry) clearTimeout(retry);
      ws?.close();
    };
  }, [projectId, channel]);
  return live;
}
