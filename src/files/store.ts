import type { Sql } from '../store/db.ts';
import { newId } from '../ids.ts';

/** The `files` table (sql/015_files.sql). Every query names its project: nothing crosses one. */
export interface FileRow {
  id: string;
  project_id: string;
  sha256: string;
  filename: string;
  content_type: string;
  size: string | number;
  width: number | null;
  height: number | null;
  alt: string | null;
  folder: string | null;
  customer_id: string | null;
  key_id: string | null;
  created_at: Date;
  deleted_at: Date | null;
  /** Videos: seconds, once the media job probed it. */
  duration?: number | null;
  /** Videos: derived object names, `{ poster, hls }`, once the media job made them. */
  media?: { poster?: string; hls?: string } | null;
}

export interface FileView {
  id: string;
  url: string;
  filename: string;
  contentType: string;
  size: number;
  width: number | null;
  height: number | null;
  alt: string | null;
  folder: string | null;
  sha256: string;
  createdAt: string;
  deletedAt: string | null;
}

/** The path of a file's bytes: fixed for the id, whose bytes never change (so immutable). */
export function filePath(row: Pick<FileRow, 'id' | 'filename'>): string {
  return `/api/files/${row.id}/${encodeURIComponent(row.filename)}`;
}

/**
 * The origin file URLs start with: SVC_BASE_URL, or the request's own origin when the base was
 * never set to a reachable address (a server on an ephemeral port, PORT=0).
 */
export function publicBase(baseUrl: string, requestUrl: string | null): string {
  return baseUrl.endsWith(':0') && requestUrl ? new URL(requestUrl).origin : baseUrl;
}

export function fileView(row: FileRow, baseUrl: string): FileView {
  return {
    id: row.id,
    url: baseUrl + filePath(row),
    filename: row.filename,
    contentType: row.content_type,
    size: Number(row.size),
    width: row.width,
    height: row.height,
    alt: row.alt,
    folder: row.folder,
    sha256: row.sha256,
    createdAt: row.created_at.toISOString(),
    deletedAt: row.deleted_at ? row.deleted_at.toISOString() : null,
  };
}

export interface NewFile {
  /** Chosen up front by a two-step upload; a new id otherwise. */
  id?: string;
  projectId: string;
  sha256: string;
  filename: string;
  contentType: string;
  size: number;
  width: number | null;
  height: number | null;
  alt: string | null;
  folder: string | null;
  customerId: string | null;
  keyId: string | null;
}

export async function insertFile(sql: Sql, f: NewFile): Promise<FileRow> {
  const [row] = await sql<FileRow[]>`
    insert into files (id, project_id, sha256, filename, content_type, size, width, height, alt, folder, customer_id, key_id)
    values (${f.id ?? newId('file')}, ${f.projectId}, ${f.sha256}, ${f.filename}, ${f.contentType}, ${f.size}, ${f.width}, ${f.height},
            ${f.alt}, ${f.folder}, ${f.customerId}, ${f.keyId})
    returning *`;
  return row!;
}

/** Live files of a project by id (record fields resolve through this, batched per request). */
export async function projectFiles(sql: Sql, projectId: string, ids: readonly string[]): Promise<FileRow[]> {
  return sql<
    FileRow[]
  >`select * from files where project_id = ${projectId} and id = any(${ids as string[]}) and deleted_at is null`;
}

/** The URL of a derived object of a file (video poster, HLS playlist). */
export function derivedPath(row: Pick<FileRow, 'id'>, name: string): string {
  return `/api/files/${row.id}/~/${name}`;
}

/** A live (not soft-deleted) file by id alone: what delivery of a URL looks up. */
export async function liveFile(sql: Sql, id: string): Promise<FileRow | null> {
  const [row] = await sql<FileRow[]>`select * from files where id = ${id} and deleted_at is null`;
  return row ?? null;
}

export async function projectFile(sql: Sql, projectId: string, id: string): Promise<FileRow | null> {
  const [row] = await sql<FileRow[]>`select * from files where id = ${id} and project_id = ${projectId}`;
  return row ?? null;
}
