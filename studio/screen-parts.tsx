import type { JSX } from 'preact';
import { useState } from 'preact/hooks';

/**
 * What the Studio's screens share: the error and confirmation lines, the table a panel lists
 * its items in, and the busy / error / notice state of a screen's actions.
 */

/** A screen's error (role alert), or nothing. */
export function ErrorLine({ error }: { error: string }) {
  return error ? (
    <p role="alert" class="error">
      {error}
    </p>
  ) : null;
}

/** What the last action did (role status), or nothing. */
export function NoticeLine({ notice }: { notice: string }) {
  return notice ? (
    <p role="status" class="ok">
      {notice}
    </p>
  ) : null;
}

/**
 * A panel's list as a table: column headings, a row per item, and `empty` in one muted row once
 * the list is known to be empty (`items` null: not loaded yet; no `empty`: no such row).
 */
export function ListTable<T>({
  label,
  columns,
  items,
  row,
  empty,
}: {
  label?: string;
  /** Headings, each once ('' for a column of buttons). */
  columns: readonly string[];
  items: readonly T[] | null;
  row: (item: T) => JSX.Element;
  empty?: string;
}) {
  return (
    <table aria-label={label}>
      <thead>
        <tr>
          {columns.map((c) => (
            <th key={c} scope="col">
              {c}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>
        {(items ?? []).map((item) => row(item))}
        {empty && items?.length === 0 && (
          <tr>
            <td colSpan={columns.length} class="muted">
              {empty}
            </td>
          </tr>
        )}
      </tbody>
    </table>
  );
}

/**
 * The actions of a screen (publish, discard, …): `act(what, fn)` clears the lines, runs `fn`
 * with the screen busy, reloads it and shows `what` — or the error.
 */
export function useActions(reload: () => Promise<unknown>) {
  const [error, setError] = useState('');
  const [notice, setNotice] = useState('');
  const [busy, setBusy] = useState(false);
  const act = async (what: string, fn: () => Promise<unknown>) => {
    setBusy(true);
    setError('');
    setNotice('');
    try {
      await fn();
      await reload();
      setNotice(what);
    } catch (e) {
      setError((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return { error, setError, notice, setNotice, busy, act };
}
