import { z } from 'zod';
import {
  IdempotentWriteHeaders,
  RestoreResult,
  SnapshotDeleted,
  SnapshotInfo,
  SnapshotList,
  SnapshotName,
  SnapshotRequest,
} from '../../api/schemas/index.ts';
import { HttpError } from '../errors.ts';
import { createAdminGuard } from '../plugins/auth.ts';
import { adminKeyed, type Idempotency } from '../plugins/idempotency.ts';
import type { Snapshots } from '../snapshots/index.ts';
import type { App } from './types.ts';

const NameParams = z.object({ name: SnapshotName });

/**
 * The sandbox admin API's snapshots: take, list, restore, delete and export. `snapshots` is
 * undefined on a chain the sandbox does not own (--rpc-url), which it cannot rewind.
 */
export function registerSnapshotRoutes(
  app: App,
  snapshots: Snapshots | undefined,
  { adminTokenHash, keys }: { adminTokenHash: string; keys: Idempotency },
): void {
  const onRequest = createAdminGuard(adminTokenHash);
  // Snapshot files and restores are not undone by a restore: nor are their keys.
  const keyed = adminKeyed(keys, adminTokenHash, { outlivesRestore: true });
  const available = (): Snapshots => {
    if (snapshots) return snapshots;
    throw new HttpError(
      400,
      'this sandbox runs on an external chain (--rpc-url), which it cannot rewind: snapshots need its own chain',
    );
  };

  app.post(
    '/sandbox/snapshots',
    {
      onRequest,
      schema: {
        headers: IdempotentWriteHeaders,
        body: SnapshotRequest,
        response: { 200: SnapshotInfo },
      },
    },
    // Snapshots are files, not rows: a key's answer commits just after them (see docs).
    keyed(async (request) => available().take(request.body.name, request.body.replace ?? false)),
  );

  app.get(
    '/sandbox/snapshots',
    { onRequest, schema: { response: { 200: SnapshotList } } },
    async () => ({ snapshots: await available().list() }),
  );

  app.post(
    '/sandbox/snapshots/:name/restore',
    {
      onRequest,
      schema: {
        headers: IdempotentWriteHeaders,
        params: NameParams,
        response: { 200: RestoreResult },
      },
    },
    // The key goes in with the snapshot's rows (see Snapshots.restore), and outlives restores.
    keyed(async (request) =>
      available().restore(request.params.name, (answer) => keys.answerOf(request).row(answer)),
    ),
  );

  app.delete(
    '/sandbox/snapshots/:name',
    {
      onRequest,
      schema: {
        headers: IdempotentWriteHeaders,
        params: NameParams,
        response: { 200: SnapshotDeleted },
      },
    },
    keyed(async (request) => {
      await available().remove(request.params.name);
      return { name: request.params.name, deleted: true as const };
    }),
  );

  app.get(
    '/sandbox/snapshots/:name/export',
    { onRequest, schema: { params: NameParams } },
    async (request, reply) => {
      const bytes = await available().exportFile(request.params.name);
      return reply
        .header('content-type', 'application/octet-stream')
        .header('content-disposition', `attachment; filename="${request.params.name}.sandbox"`)
        .send(bytes);
    },
  );
}
