/**
 * Work the editors must finish before a save reads the room: the rich-text fields register how
 * to bring their mirrored HTML up to date (richtext.tsx); Save draft and Publish wait for it.
 */
const settlers = new Set<() => Promise<void>>();

export function onSettle(fn: () => Promise<void>): () => void {
  settlers.add(fn);
  return () => void settlers.delete(fn);
}

export async function settle(): Promise<void> {
  await Promise.all([...settlers].map((fn) => fn()));
}
