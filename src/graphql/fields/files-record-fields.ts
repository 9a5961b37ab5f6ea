import {
  GraphQLFloat,
  GraphQLID,
  GraphQLInputObjectType,
  GraphQLInt,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLString,
  type GraphQLFieldConfigMap,
  type GraphQLInputFieldConfigMap,
} from 'graphql';
import { derivedPath, fileView, projectFiles, type FileRow } from '../../files/store.ts';
import { FileType, FitEnum, FormatEnum } from './files.ts';
import type { GqlContext } from '../context.ts';

/**
 * `image`, `video` and `file` record fields (spec "Field types"). A field holds a file id (and,
 * for images, the alt text and focal point of this use); on read it resolves to the uploaded
 * `file` and its `url`, size and dimensions. `url` of an image takes transform arguments and
 * adds the field's focal point to a cover crop. Values written before uploads existed (an
 * external `url` and its properties) still read as written.
 */
type Asset = Record<string, unknown> & { fileId?: string | null };

const nn = (t: typeof GraphQLFloat) => new GraphQLNonNull(t);
const FocalPoint = new GraphQLObjectType({
  name: 'FocalPoint',
  fields: { x: { type: nn(GraphQLFloat) }, y: { type: nn(GraphQLFloat) } },
});
const FocalPointInput = new GraphQLInputObjectType({
  name: 'FocalPointInput',
  fields: { x: { type: nn(GraphQLFloat) }, y: { type: nn(GraphQLFloat) } },
});

/** Files of one request, loaded in one query per tick (a list of 50 records is one query). */
const loaders = new WeakMap<
  GqlContext,
  { pending: Map<string, ((r: FileRow | null) => void)[]>; done: Map<string, FileRow | null> }
>();

export function loadFile(ctx: GqlContext, id: string): Promise<FileRow | null> {
  let l = loaders.get(ctx);
  if (!l) loaders.set(ctx, (l = { pending: new Map(), done: new Map() }));
  if (l.done.has(id)) return Promise.resolve(l.done.get(id)!);
  const state = l;
  return new Promise((resolve, reject) => {
    const waiting = state.pending.get(id);
    if (waiting) return void waiting.push(resolve);
    state.pending.set(id, [resolve]);
    if (state.pending.size > 1) return;
    setImmediate(() => {
      const batch = new Map(state.pending);
      state.pending.clear();
      projectFiles(ctx.svc.sql, ctx.principal.projectId, [...batch.keys()]).then((rows) => {
        const byId = new Map(rows.map((r) => [r.id, r]));
        for (const [k, fns] of batch) {
          const row = byId.get(k) ?? null;
          state.done.set(k, row);
          for (const fn of fns) fn(row);
        }
      }, reject);
    });
  });
}

const fileOf = (a: Asset, ctx: GqlContext) =>
  typeof a.fileId === 'string' ? loadFile(ctx, a.fileId) : Promise.resolve(null);
const baseOf = (ctx: GqlContext) => (ctx.svc.settings as { baseUrl?: string }).baseUrl ?? '';

/** A property of the file when the field names one, else the written value. */
function fromFile(key: string, pick: (f: FileRow) => unknown) {
  return async (a: Asset, _args: unknown, ctx: GqlContext) => {
    if (typeof a.fileId !== 'string') return a[key] ?? null;
    const f = await fileOf(a, ctx);
    return f ? pick(f) : null;
  };
}

interface UrlArgs {
  w?: number | null;
  h?: number | null;
  fit?: string | null;
  format?: string | null;
  q?: number | null;
}

const urlArgs = {
  w: { type: GraphQLInt },
  h: { type: GraphQLInt },
  fit: { type: FitEnum },
  format: { type: FormatEnum },
  q: { type: GraphQLInt },
};

async function imageUrl(a: Asset, args: UrlArgs, ctx: GqlContext): Promise<string | null> {
  if (typeof a.fileId !== 'string') return (a.url as string | undefined) ?? null;
  const f = await fileOf(a, ctx);
  if (!f) return null;
  const q = new URLSearchParams();
  if (args.w) q.set('w', String(args.w));
  if (args.h) q.set('h', String(args.h));
  if (args.fit) q.set('fit', args.fit);
  if (args.format) q.set('format', args.format);
  if (args.q) q.set('q', String(args.q));
  const fp = a.focalPoint as { x: number; y: number } | undefined;
  if (fp && args.w && args.h && (args.fit ?? 'cover') === 'cover') q.set('fp', `${round(fp.x)},${round(fp.y)}`);
  const url = fileView(f, baseOf(ctx)).url;
  return q.size ? `${url}?${q}` : url;
}

const round = (n: number) => String(Math.round(n * 1000) / 1000);

function videoDerived(key: 'poster' | 'hls') {
  return async (a: Asset, _args: unknown, ctx: GqlContext) => {
    if (typeof a.fileId !== 'string') return (a[key === 'poster' ? 'poster' : 'hlsUrl'] as string | undefined) ?? null;
    const f = await fileOf(a, ctx);
    const name = f?.media?.[key];
    return f && name ? baseOf(ctx) + derivedPath(f, name) : null;
  };
}
/** The file's URL (null once it is deleted), or the URL the field holds when it names no file. */
async function fileUrl(a: Asset, _args: unknown, ctx: GqlContext): Promise<string | null> {
  if (typeof a.fileId !== 'string') return (a.url as string) ?? null;
  const f = await fileOf(a, ctx);
  return f ? fileView(f, baseOf(ctx)).url : null;
}

const common = (): GraphQLFieldConfigMap<Asset, GqlContext> => ({
  fileId: { type: GraphQLID },
  file: {
    type: FileType,
    description: 'The uploaded file, when the field names one (null once it is deleted).',
    resolve: (a, _x, ctx) => fileOf(a, ctx),
  },
  mimeType: { type: GraphQLString, resolve: fromFile('mimeType', (f) => f.content_type) },
});

export const ImageAsset = new GraphQLObjectType<Asset, GqlContext>({
  name: 'ImageAsset',
  fields: () => ({
    ...common(),
    url: {
      type: GraphQLString,
      args: urlArgs,
      description: 'The image URL; with arguments, a transformed variant (a cover crop keeps the focal point).',
      resolve: imageUrl,
    },
    alt: {
      type: GraphQLString,
      resolve: async (a, _x, ctx) => (a.alt as string | undefined) ?? (await fileOf(a, ctx))?.alt ?? null,
    },
    width: { type: GraphQLFloat, resolve: fromFile('width', (f) => f.width) },
    height: { type: GraphQLFloat, resolve: fromFile('height', (f) => f.height) },
    focalPoint: { type: FocalPoint },
  }),
});

export const VideoAsset = new GraphQLObjectType<Asset, GqlContext>({
  name: 'VideoAsset',
  fields: () => ({
    ...common(),
    url: { type: GraphQLString, resolve: fileUrl },
    poster: {
      type: GraphQLString,
      description: 'A poster image (a frame of the video), once the media job made it.',
      resolve: videoDerived('poster'),
    },
    hls: {
      type: GraphQLString,
      description: 'The HLS master playlist, once made; null without ffmpeg.',
      resolve: videoDerived('hls'),
    },
    hlsUrl: { type: GraphQLString, description: 'Same as hls.', resolve: videoDerived('hls') },
    duration: { type: GraphQLFloat, resolve: fromFile('duration', (f) => f.duration ?? null) },
    width: { type: GraphQLFloat, resolve: fromFile('width', (f) => f.width) },
    height: { type: GraphQLFloat, resolve: fromFile('height', (f) => f.height) },
  }),
});

export const FileAsset = new GraphQLObjectType<Asset, GqlContext>({
  name: 'FileAsset',
  fields: () => ({
    ...common(),
    url: { type: GraphQLString, resolve: fileUrl },
    name: { type: GraphQLString, resolve: fromFile('name', (f) => f.filename) },
    size: { type: GraphQLFloat, resolve: fromFile('size', (f) => Number(f.size)) },
  }),
});

const inputFields = {
  image: {
    fileId: GraphQLID,
    url: GraphQLString,
    alt: GraphQLString,
    width: GraphQLFloat,
    height: GraphQLFloat,
    mimeType: GraphQLString,
  },
  video: {
    fileId: GraphQLID,
    url: GraphQLString,
    poster: GraphQLString,
    hlsUrl: GraphQLString,
    duration: GraphQLFloat,
    width: GraphQLFloat,
    height: GraphQLFloat,
    mimeType: GraphQLString,
  },
  file: { fileId: GraphQLID, url: GraphQLString, name: GraphQLString, mimeType: GraphQLString, size: GraphQLFloat },
} as const;

function inputOf(kind: 'image' | 'video' | 'file', name: string): GraphQLInputObjectType {
  const fields: GraphQLInputFieldConfigMap = Object.fromEntries(
    Object.entries(inputFields[kind]).map(([k, t]) => [k, { type: t }]),
  );
  if (kind === 'image') fields.focalPoint = { type: FocalPointInput };
  return new GraphQLInputObjectType({
    name,
    fields,
    description: 'Give `fileId` (an uploaded file of this project); the other properties are for external assets.',
  });
}

export const ASSETS = {
  image: { out: ImageAsset, inp: inputOf('image', 'ImageAssetInput') },
  video: { out: VideoAsset, inp: inputOf('video', 'VideoAssetInput') },
  file: { out: FileAsset, inp: inputOf('file', 'FileAssetInput') },
};
