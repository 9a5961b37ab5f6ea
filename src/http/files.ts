import { Elysia } from 'elysia';
import type { Service } from '../service.ts';
import { requireScope } from '../auth/scopes.ts';
import { handleUpload } from '../files/upload.ts';
import { receiveUpload, UPLOADS_PATH } from '../files/signed.ts';
import { deliverDerived, deliverFile } from '../files/deliver.ts';
import { fileView, publicBase } from '../files/store.ts';

/** The multipart framing allowed on top of the file itself (boundaries, part headers, fields). */
export const UPLOAD_OVERHEAD = 64 * 1024;
export const UPLOAD_PATH = '/api/files/upload';
export { UPLOADS_PATH };

/** Files over REST (docs/files.md): the multipart upload, and delivery of file URLs (no key). */
export function fileRoutes(svc: Service) {
  const { files } = svc;
  const deps = {
    sql: svc.sql,
    storage: files.storage,
    limits: files.limitDefaults,
    maxInputPixels: files.config.maxInputPixels,
  };
  const deliver = {
    sql: svc.sql,
    lookup: (id: string) => files.live.get(id),
    storage: files.storage,
    images: files.images,
    maxOutputPixels: files.config.maxOutputPixels,
  };
  return (
    new Elysia({ name: 'svc.files' })
      .post(
        UPLOAD_PATH,
        async ({ request }) => {
          const admission = await svc.gate.admit({ headers: request.headers, request });
          requireScope(admission.key, 'files:write');
          const row = await handleUpload(deps, admission, request);
          const { id, url, filename, contentType, size, width, height, alt, folder, createdAt } = fileView(
            row,
            publicBase(svc.settings.baseUrl, request.url),
          );
          return new Response(
            JSON.stringify({ id, url, filename, contentType, size, width, height, alt, folder, createdAt }),
            {
              status: 201,
              headers: { ...admission.headers, 'content-type': 'application/json', 'cache-control': 'no-store' },
            },
          );
        },
        { parse: 'none' },
      )
      // The signed URL of a two-step upload (local storage): the token is the credential.
      .put(
        `${UPLOADS_PATH}:id`,
        async ({ params, request, query }) => {
          const r = await receiveUpload(
            files.signedDeps,
            params.id,
            typeof query.token === 'string' ? query.token : null,
            request,
          );
          return new Response(JSON.stringify(r), {
            status: 200,
            headers: { 'content-type': 'application/json', 'cache-control': 'no-store' },
          });
        },
        { parse: 'none' },
      )
      .get('/api/files/:id/~/:name', ({ params, request }) => deliverDerived(deliver, params.id, params.name, request))
      .get('/api/files/:id/:name', ({ params, request }) => deliverFile(deliver, params.id, request))
      .head('/api/files/:id/:name', ({ params, request }) => deliverFile(deliver, params.id, request))
  );
}
