import { useEffect, useRef } from 'preact/hooks';
import * as Y from 'yjs';
import { EditorState, type Plugin } from 'prosemirror-state';
import { EditorView } from 'prosemirror-view';
import { DOMParser as PMParser, DOMSerializer, Schema, type Node as PMNode } from 'prosemirror-model';
import { schema as basic } from 'prosemirror-schema-basic';
import { addListNodes } from 'prosemirror-schema-list';
import { exampleSetup } from 'prosemirror-example-setup';
import { keymap } from 'prosemirror-keymap';
import { redo, undo, yCursorPlugin, ySyncPlugin, yUndoPlugin } from 'y-prosemirror';
import type { FieldProps } from './field-props.ts';
import { applyDiff } from './text-binding.ts';
import { onSettle } from './settle.ts';

/**
 * The rich-text field: ProseMirror (with prosemirror-example-setup's menu and keys). In a room
 * it is bound with y-prosemirror to the document's `richtext:<field>` XML fragment, with the
 * other editors' cursors from awareness. The record stores HTML, kept in the content map's
 * Y.Text (what the server saves, docs/collab.md). One editor writes that mirror: the lowest
 * client id among the writers that have this field's editor open (awareness `mirrors`), so two
 * editors never apply competing diffs to the text. It also seeds an empty fragment from the
 * text, and re-seeds it when the text changed from outside the room (a GraphQL write merged in).
 */
export const richSchema = new Schema({
  nodes: addListNodes(basic.spec.nodes, 'paragraph block*', 'block'),
  marks: basic.spec.marks,
});
const MIRROR = Symbol('richtext-mirror');

export function toHtml(doc: PMNode): string {
  if (doc.childCount === 1 && doc.firstChild!.type.name === 'paragraph' && doc.firstChild!.childCount === 0) return '';
  const div = document.createElement('div');
  div.appendChild(DOMSerializer.fromSchema(richSchema).serializeFragment(doc.content));
  return div.innerHTML;
}

export function fromHtml(html: string): PMNode {
  const div = document.createElement('div');
  div.innerHTML = html;
  return PMParser.fromSchema(richSchema).parse(div);
}

function editable(readOnly: boolean) {
  return { editable: () => !readOnly, attributes: { role: 'textbox', 'aria-multiline': 'true', class: 'rich' } };
}

export function RichText({ field, value, onChange, text, ctx, id }: FieldProps) {
  const host = useRef<HTMLDivElement>(null);
  useEffect(() => {
    const el = host.current!;
    const label = { 'aria-labelledby': `${id}-label` };
    if (!text || !ctx.doc || !ctx.awareness) {
      // The "new record" form: a plain editor whose HTML is the value.
      let view: EditorView;
      view = new EditorView(el, {
        state: EditorState.create({
          schema: richSchema,
          doc: fromHtml(typeof value === 'string' ? value : ''),
          plugins: exampleSetup({ schema: richSchema }),
        }),
        ...editable(ctx.readOnly),
        attributes: { ...editable(ctx.readOnly).attributes, ...label },
        dispatchTransaction(tr) {
          view.updateState(view.state.apply(tr));
          if (tr.docChanged) onChange(toHtml(view.state.doc));
        },
      });
      return () => view.destroy();
    }
    const doc = ctx.doc;
    const awareness = ctx.awareness;
    const fragment = doc.getXmlFragment(`richtext:${field.key}`);
    // Announce that this editor can mirror the field (a writer with the field's editor open).
    const announce = (on: boolean) => {
      const mine = new Set<string>((awareness.getLocalState() as { mirrors?: string[] } | null)?.mirrors ?? []);
      if (on) mine.add(field.key);
      else mine.delete(field.key);
      awareness.setLocalStateField('mirrors', [...mine]);
    };
    if (!ctx.readOnly) announce(true);
    const isLeader = () => {
      let min = Infinity;
      awareness.getStates().forEach((s, clientId) => {
        const st = s as { user?: { canWrite?: boolean }; mirrors?: string[] };
        if (st.user?.canWrite && st.mirrors?.includes(field.key) && clientId < min) min = clientId;
      });
      return min === doc.clientID;
    };
    const plugins: Plugin[] = [
      ySyncPlugin(fragment),
      yCursorPlugin(awareness),
      yUndoPlugin(),
      keymap({ 'Mod-z': undo, 'Mod-y': redo, 'Mod-Shift-z': redo }),
      ...exampleSetup({ schema: richSchema, history: false }),
    ];
    let destroyed = false;
    const view = new EditorView(el, {
      state: EditorState.create({ schema: richSchema, plugins }),
      ...editable(ctx.readOnly),
      attributes: { ...editable(ctx.readOnly).attributes, ...label },
      // y-prosemirror dispatches its cursor and sync metas a tick after an awareness or document
      // change (setMeta's timeout). Leaving the editor changes awareness (the room closes, this
      // field stops mirroring) and destroys the view in the same tick, so such a dispatch can
      // land on a destroyed view (TypeError: … reading 'matchesNode'): drop it then.
      // `this`: plugins may dispatch while the constructor runs, before `view` is assigned.
      dispatchTransaction(this: EditorView, tr) {
        if (destroyed) return;
        this.updateState(this.state.apply(tr));
      },
    });
    let fragmentAt = 0;
    let textAt = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const reseed = (html: string) => {
      const next = fromHtml(html);
      view.dispatch(view.state.tr.replaceWith(0, view.state.doc.content.size, next.content));
    };
    const reconcile = () => {
      timer = undefined;
      if (destroyed) return;
      const h = toHtml(view.state.doc);
      const t = text.toString();
      if (h === t || ctx.readOnly || !isLeader()) return;
      if (fragment.length === 0 || textAt > fragmentAt) reseed(t);
      else doc.transact(() => applyDiff(text, h), MIRROR);
    };
    const schedule = () => {
      if (timer) clearTimeout(timer);
      timer = setTimeout(reconcile, 250);
    };
    const onFragment = () => {
      fragmentAt = Date.now();
      schedule();
    };
    const onText = (_e: unknown, tr: Y.Transaction) => {
      if (tr.origin === MIRROR || tr.local) return;
      textAt = Date.now();
      schedule();
    };
    fragment.observeDeep(onFragment);
    text.observe(onText);
    // A new leader (the previous one left or closed the field) catches up at once.
    const onAwareness = () => schedule();
    awareness.on('change', onAwareness);
    // Before a save: the leader writes now; anyone else waits (up to 3 s) for its mirror.
    const stopSettle = onSettle(async () => {
      if (timer) {
        clearTimeout(timer);
        reconcile();
      }
      const end = Date.now() + 3000;
      while (!destroyed && toHtml(view.state.doc) !== text.toString() && Date.now() < end) {
        if (isLeader()) reconcile();
        await new Promise((r) => setTimeout(r, 50));
      }
    });
    // A room whose fragment is empty but whose text holds the record's HTML: seed it (once).
    if (fragment.length === 0 && text.length > 0) schedule();
    return () => {
      if (timer) clearTimeout(timer);
      stopSettle();
      awareness.off('change', onAwareness);
      fragment.unobserveDeep(onFragment);
      text.unobserve(onText);
      // The view first (its plugins stop listening to awareness), then the awareness change.
      destroyed = true;
      view.destroy();
      if (!ctx.readOnly) announce(false);
    };
  }, [text, ctx.doc, ctx.readOnly]);
  return (
    <div
      class="richtext"
      id={id}
      ref={host}
      onFocusCapture={() => ctx.onFocus?.(field.key)}
      onBlurCapture={() => ctx.onFocus?.(null)}
    />
  );
}
