import type { ComponentType } from 'preact';
import { useEffect, useState } from 'preact/hooks';

/** Renders a component from a chunk loaded on first use (the record editor, GraphiQL). */
export function lazy<P extends object>(load: () => Promise<ComponentType<P>>): ComponentType<P> {
  let loaded: ComponentType<P> | undefined;
  let pending: Promise<ComponentType<P>> | undefined;
  // biome-ignore lint/correctness/noComponentHookFactories: made once per screen at module load (a lazy chunk), not per render
  return function Lazy(props: P) {
    const [C, setC] = useState<ComponentType<P> | undefined>(() => loaded);
    const [error, setError] = useState('');
    useEffect(() => {
      if (C) return;
      pending ??= load().then((c) => (loaded = c));
      pending.then(
        (c) => setC(() => c),
        (e: Error) => setError(e.message),
      );
    }, []);
    if (error)
      return (
        <p role="alert" class="error">
          Could not load this screen: {error}
        </p>
      );
    return C ? (
      <C {...props} />
    ) : (
      <p aria-busy="true" class="muted">
        Loading…
      </p>
    );
  };
}
