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
import type { FieldProps } from './fields.tsx';
import { applyDiff } from './text-binding.ts';

/**
 * The rich-text field: ProseMirror (with prosemirror-example-setup's menu and keys). In a room
 * it is bound with y-prosemirror to the document's `richtext:<field>` XML fragment, with the
 * other editors' cursors from awareness. The record stores HTML, kept in the content map's
 * Y.Text (what the server saves, docs/collab.md): whoever edits mirrors the editor's HTML into
 * it, and when the two disagree without a local edit (a write made outside the room, or a
 * concurrent edit) the lowest-numbered writer in the room reconciles them.
 */
export const richSchema = new Schema({ nodes: addListNodes(basic.spec.nodes, 'paragraph block*', 'block'), marks: basic.spec.marks });
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
        state: EditorState.create({ schema: richSchema, doc: fromHtml(typeof value === 'string' ? value : ''), plugins: exampleSetup({ schema: richSchema }) }),
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
    const isLeader = () => {
      let min = Infinity;
      awareness.getStates().forEach((s, clientId) => { if ((s as { user?: { canWrite?: boolean } }).user?.canWrite && clientId < min) min = clientId; });
      return min === doc.clientID;
    };
    const plugins: Plugin[] = [
      ySyncPlugin(fragment),
      yCursorPlugin(awareness),
      yUndoPlugin(),
      keymap({ 'Mod-z': undo, 'Mod-y': redo, 'Mod-Shift-z': redo }),
      ...exampleSetup({ schema: richSchema, history: false }),
    ];
    const view = new EditorView(el, {
      state: EditorState.create({ schema: richSchema, plugins }),
      ...editable(ctx.readOnly),
      attributes: { ...editable(ctx.readOnly).attributes, ...label },
    });
    let localEdit = false;
    let fragmentAt = 0;
    let textAt = 0;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const reseed = (html: string) => {
      const next = fromHtml(html);
      view.dispatch(view.state.tr.replaceWith(0, view.state.doc.content.size, next.content));
    };
    const reconcile = () => {
      timer = undefined;
      const h = toHtml(view.state.doc);
      const t = text.toString();
      const mine = localEdit;
      localEdit = false;
      if (h === t || ctx.readOnly) return;
      if (mine) applyDiff(text, h);
      else if (isLeader()) {
        if (fragment.length === 0 || textAt > fragmentAt) reseed(t);
        else doc.transact(() => applyDiff(text, h), MIRROR);
      }
    };
    const schedule = () => {
      if (timer) clearTimeout(timer);
      timer = setTimeout(reconcile, 250);
    };
    const onFragment = (_e: unknown, tr: Y.Transaction) => {
      fragmentAt = Date.now();
      if (tr.local) localEdit = true;
      schedule();
    };
    const onText = (_e: unknown, tr: Y.Transaction) => {
      if (tr.origin === MIRROR || tr.local) return;
      textAt = Date.now();
      schedule();
    };
    fragment.observeDeep(onFragment);
    text.observe(onText);
    // A room whose fragment is empty but whose text holds the record's HTML: seed it (once).
    if (fragment.length === 0 && text.length > 0) schedule();
    return () => {
      if (timer) clearTimeout(timer);
      fragment.unobserveDeep(onFragment);
      text.unobserve(onText);
      view.destroy();
    };
  }, [text, ctx.doc, ctx.readOnly]);
  return <div class="richtext" id={id} ref={host} onFocusCapture={() => ctx.onFocus?.(field.key)} onBlurCapture={() => ctx.onFocus?.(null)} />;
}
