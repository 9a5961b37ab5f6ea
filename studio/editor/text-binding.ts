import * as Y from 'yjs';

/**
 * Binds an <input> or <textarea> to a Y.Text: local typing becomes the minimal delete/insert
 * on the shared text, remote changes update the element and move the caret through the
 * change's delta, so concurrent typing in one field merges and nobody's caret jumps.
 */
export const LOCAL = Symbol('studio-local');

export function applyDiff(text: Y.Text, next: string): void {
  const prev = text.toString();
  if (prev === next) return;
  let start = 0;
  const max = Math.min(prev.length, next.length);
  while (start < max && prev.charCodeAt(start) === next.charCodeAt(start)) start++;
  let end = 0;
  while (end < max - start && prev.charCodeAt(prev.length - 1 - end) === next.charCodeAt(next.length - 1 - end)) end++;
  text.doc!.transact(() => {
    if (prev.length - start - end > 0) text.delete(start, prev.length - start - end);
    const ins = next.slice(start, next.length - end);
    if (ins) text.insert(start, ins);
  }, LOCAL);
}

function shift(pos: number, delta: { retain?: number; insert?: unknown; delete?: number }[]): number {
  let index = 0;
  let out = pos;
  for (const d of delta) {
    if (d.retain) index += d.retain;
    else if (typeof d.insert === 'string') {
      if (index <= pos) out += d.insert.length;
      index += d.insert.length;
    } else if (d.delete) {
      if (index < pos) out -= Math.min(d.delete, pos - index);
    }
    if (index > pos) break;
  }
  return Math.max(0, out);
}

export function bindText(el: HTMLInputElement | HTMLTextAreaElement, text: Y.Text): () => void {
  el.value = text.toString();
  const onInput = () => applyDiff(text, el.value);
  const observer = (e: Y.YTextEvent, tr: Y.Transaction) => {
    if (tr.origin === LOCAL) return;
    const focused = document.activeElement === el;
    const s = el.selectionStart ?? 0;
    const t = el.selectionEnd ?? 0;
    el.value = text.toString();
    if (focused) el.setSelectionRange(shift(s, e.delta as never), shift(t, e.delta as never));
  };
  el.addEventListener('input', onInput);
  text.observe(observer);
  return () => {
    el.removeEventListener('input', onInput);
    text.unobserve(observer);
  };
}
