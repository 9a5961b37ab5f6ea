import * as Y from 'yjs';
import { CONTENT_MAP } from './content.ts';

/**
 * Field write rules inside a room (no I/O): which top-level entries of `Y.Map('content')` a Yjs
 * update would change, found before the update is applied, so an update touching a field the
 * editor may not write is refused as a whole — never applied, broadcast or saved.
 *
 * Yjs does not encode where an item lives when it has a left or right origin: the item inherits
 * its parent and map key from that neighbour at integration. So each new item is followed to a
 * neighbour or parent it names — in the update itself or in the room's document — until a root
 * type is reached; deletions are followed the same way from the document's items.
 */

/** Outside `Y.Map('content')`: another root type, or list content of the root. Never saved. */
export const OUTSIDE = Symbol('outside content');
/** Refers to items the room does not have: Yjs would keep it pending; refused when restricted. */
export const UNKNOWN = Symbol('unknown position');
/** Lands nowhere (its neighbour or parent was garbage collected): no visible change. */
export const NOWHERE = Symbol('nowhere');

export type Place = string | typeof OUTSIDE | typeof UNKNOWN | typeof NOWHERE;
type Struct = Y.Item | Y.GC | Y.Skip;

/**
 * Where the new structs of an update land: the update's structs Yjs has not integrated yet
 * (per client), and the place of one of them or of an integrated item.
 */
export function placeResolver(doc: Y.Doc, decoded: ReturnType<typeof Y.decodeUpdate>) {
  const { structs } = decoded as unknown as { structs: Struct[] };
  const store = doc.store;
  const content = doc.getMap(CONTENT_MAP) as unknown as Y.AbstractType<unknown>;
  const fresh = new Map<number, (Y.Item | Y.GC)[]>();
  for (const s of structs) {
    if (s instanceof Y.Skip) continue;
    const known = Y.getState(store, s.id.client);
    if (s.id.clock + s.length <= known) continue; // already integrated: Yjs skips it
    let list = fresh.get(s.id.client);
    if (!list) fresh.set(s.id.client, (list = []));
    list.push(s);
  }
  const memo = new Map<Y.Item | Y.GC, Place>();
  /** The struct holding `id`: in the document, else among the update's new structs. */
  const find = (id: Y.ID): { stored: Y.Item | Y.GC } | { fresh: Y.Item | Y.GC } | null => {
    if (id.clock < Y.getState(store, id.client)) {
      const list = store.clients.get(id.client)!;
      return { stored: list[Y.findIndexSS(list, id.clock)] as Y.Item | Y.GC };
    }
    const list = fresh.get(id.client);
    const s = list?.find((x) => x.id.clock <= id.clock && id.clock < x.id.clock + x.length);
    return s ? { fresh: s } : null;
  };

  /** The content key an integrated item sits under. */
  const storedPlace = (s: Y.Item | Y.GC): Place => {
    if (s instanceof Y.GC) return NOWHERE;
    let item: Y.Item = s;
    for (let depth = 0; depth < 10_000; depth++) {
      const parent = item.parent as Y.AbstractType<unknown> | null;
      if (!parent) return NOWHERE;
      if (parent._item === null) return parent === content ? (item.parentSub ?? OUTSIDE) : OUTSIDE;
      item = parent._item;
    }
    return UNKNOWN;
  };

  /** The content key a new item would land under (followed iteratively: chains can be long). */
  const freshPlace = (start: Y.Item | Y.GC): Place => {
    const chain: (Y.Item | Y.GC)[] = [];
    const seen = new Set<Y.Item | Y.GC>();
    let cur: Y.Item | Y.GC = start;
    let place: Place = UNKNOWN;
    for (;;) {
      const m = memo.get(cur);
      if (m !== undefined) {
        place = m;
        break;
      }
      if (seen.has(cur)) break; // a crafted cycle: UNKNOWN
      seen.add(cur);
      chain.push(cur);
      if (cur instanceof Y.GC) {
        place = NOWHERE;
        break;
      }
      const parent = cur.parent as unknown;
      if (typeof parent === 'string') {
        place = parent === CONTENT_MAP ? (cur.parentSub ?? OUTSIDE) : OUTSIDE;
        break;
      }
      // A parent id, else the left origin, else the right origin (as Item.getMissing does).
      const refs =
        parent instanceof Y.ID ? [parent] : [cur.origin, cur.rightOrigin].filter((x): x is Y.ID => x !== null);
      const found = refs.map(find);
      if (found.some((f) => f === null)) break; // UNKNOWN
      if (!(parent instanceof Y.ID) && found.some((f) => ('stored' in f! ? f.stored : f!.fresh) instanceof Y.GC)) {
        place = NOWHERE;
        break;
      }
      const next = found[0];
      if (!next) break; // no parent and no origin: malformed
      if ('stored' in next) {
        place = storedPlace(next.stored);
        break;
      }
      cur = next.fresh;
    }
    for (const c of chain) memo.set(c, place);
    return place;
  };

  return { fresh, freshPlace, storedPlace };
}

/** Where the changes of `update` land: field keys, OUTSIDE, UNKNOWN. Empty when nothing changes. */
export function touchedPlaces(
  doc: Y.Doc,
  update: Uint8Array,
  decoded = Y.decodeUpdate(update),
): Set<string | typeof OUTSIDE | typeof UNKNOWN> {
  const { ds } = decoded as unknown as { ds: { clients: Map<number, { clock: number; len: number }[]> } };
  const store = doc.store;
  const { fresh, freshPlace, storedPlace } = placeResolver(doc, decoded);
  const out = new Set<string | typeof OUTSIDE | typeof UNKNOWN>();
  const add = (p: Place) => void (p !== NOWHERE && out.add(p));

  for (const list of fresh.values()) for (const s of list) add(freshPlace(s));

  for (const [client, ranges] of ds.clients) {
    const known = Y.getState(store, client);
    const list = store.clients.get(client);
    for (const { clock, len } of ranges) {
      const end = clock + len;
      if (clock < known && list) {
        for (let i = Y.findIndexSS(list, clock); i < list.length && list[i]!.id.clock < end; i++) {
          const s = list[i] as Y.Item | Y.GC;
          if (!s.deleted) add(storedPlace(s));
        }
      }
      if (end > known) {
        const news = fresh.get(client) ?? [];
        let covered = Math.max(clock, known);
        for (const s of news) {
          if (s.id.clock + s.length <= covered || s.id.clock >= end) continue;
          if (s.id.clock > covered) break;
          add(freshPlace(s));
          covered = s.id.clock + s.length;
        }
        if (covered < end) out.add(UNKNOWN);
      }
    }
  }
  return out;
}

/**
 * What an editor may change: `null` for anything; else the field keys it may not write
 * (`all`: a read-only socket, which may change nothing at all).
 */
export type WriteRule = null | { all: true } | { all: false; denied: ReadonlySet<string> };

/** The places of `update` the rule refuses (empty: the update may be applied). */
export function refusedPlaces(
  rule: WriteRule,
  doc: Y.Doc,
  update: Uint8Array,
  decoded?: ReturnType<typeof Y.decodeUpdate>,
): string[] {
  if (rule === null) return [];
  const out: string[] = [];
  for (const p of touchedPlaces(doc, update, decoded)) {
    if (rule.all) out.push(p === OUTSIDE ? '(outside the fields)' : p === UNKNOWN ? '(unknown position)' : p);
    else if (p === UNKNOWN) out.push('(unknown position)');
    else if (p !== OUTSIDE && rule.denied.has(p)) out.push(p);
  }
  return out;
}

/**
 * Takes the clock ranges of a refused update's new structs without their content: garbage
 * collected structs of the same ids. The editor's next updates continue its clock; without the
 * gap filled, Yjs would hold every later update of that editor as pending, here and in every
 * peer. The fill carries no content (broadcast and stored like any update, it changes nothing).
 */
export function skipUpdate(doc: Y.Doc, update: Uint8Array, origin: unknown, decoded = Y.decodeUpdate(update)): void {
  const { structs } = decoded as unknown as { structs: Struct[] };
  const ranges = new Map<number, { clock: number; end: number; open: boolean }>();
  for (const s of structs) {
    const r = ranges.get(s.id.client);
    if (s instanceof Y.Skip) {
      // A gap inside the update: fill only up to it.
      if (r) r.open = false;
      else ranges.set(s.id.client, { clock: s.id.clock, end: s.id.clock, open: false });
    } else if (!r) ranges.set(s.id.client, { clock: s.id.clock, end: s.id.clock + s.length, open: true });
    else if (r.open && r.end === s.id.clock) r.end += s.length;
    else r.open = false;
  }
  const fills: Y.GC[] = [];
  for (const [client, r] of ranges) {
    const state = Y.getState(doc.store, client);
    // Only a contiguous continuation: a range starting past the state would leave a gap.
    if (r.clock <= state && r.end > state) fills.push(new Y.GC(Y.createID(client, state), r.end - state));
  }
  if (fills.length === 0) return;
  doc.transact((tr) => {
    for (const gc of fills) gc.integrate(tr, 0);
  }, origin);
}
