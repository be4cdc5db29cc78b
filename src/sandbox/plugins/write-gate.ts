import type { FastifyRequest } from 'fastify';
import { HttpError } from '../errors.ts';
import type { App } from '../routes/types.ts';

/** Retry-After on a write refused while the sandbox is restored: a restore takes well under this. */
const RESTORING_RETRY_AFTER_S = 1;
/** How long a restore waits for the writes running when it starts; then it is refused. */
export const WRITES_DRAIN_TIMEOUT_MS = 30_000;

/**
 * Holds writes while the sandbox is restored to a snapshot: a write that arrives is refused
 * with 503 (never queued, never lost: its client knows it did not happen), and the restore
 * starts once every write already running has been answered, so that each belongs wholly to
 * the state before it.
 */
export interface WriteGate {
  /**
   * Refuses new writes, and resolves once those running are answered; call the release after.
   * Rejects with a 503, refusing nothing any more, when they are not all answered in time.
   */
  hold(timeoutMs?: number): Promise<(stillRefused?: string) => void>;
}

/** Requests that change state: any but GET, HEAD, OPTIONS, GraphQL's POST (reads only) and the snapshot routes. */
function isWrite(request: FastifyRequest): boolean {
  if (request.method === 'GET' || request.method === 'HEAD' || request.method === 'OPTIONS') {
    return false;
  }
  const path = request.routeOptions.url ?? '';
  return path !== '/graphql' && !path.startsWith('/sandbox/snapshots');
}

export function registerWriteGate(app: App): WriteGate {
  let held = false;
  /** Set when writes are refused for good (a restore stopped half way), and why. */
  let refusedFor: string | undefined;
  let running = 0;
  const counted = new WeakSet<object>();
  let drained: (() => void) | undefined;
  app.addHook('preHandler', async (request, reply) => {
    if (!isWrite(request)) return;
    if (refusedFor !== undefined) {
      return reply.code(503).send({ error: `nothing was written: ${refusedFor}` });
    }
    if (held) {
      reply.header('retry-after', String(RESTORING_RETRY_AFTER_S));
      return reply.code(503).send({
        error:
          'the sandbox is being restored to a snapshot; nothing was written: try again shortly',
      });
    }
    counted.add(request);
    running++;
  });
  app.addHook('onSend', async (request) => {
    if (!counted.delete(request)) return;
    running--;
    if (running === 0) drained?.();
  });
  return {
    async hold(timeoutMs = WRITES_DRAIN_TIMEOUT_MS) {
      held = true;
      if (running > 0) {
        let timer: NodeJS.Timeout | undefined;
        const answered = await new Promise<boolean>((resolve) => {
          drained = () => resolve(true);
          timer = setTimeout(() => resolve(false), timeoutMs);
        }).finally(() => {
          clearTimeout(timer);
          drained = undefined;
        });
        if (!answered) {
          held = false;
          throw new HttpError(
            503,
            `${running} write(s) were still running after ${timeoutMs / 1000} s; nothing was restored: try again`,
          );
        }
      }
      return (stillRefused) => {
        held = false;
        refusedFor ??= stillRefused;
      };
    },
  };
}
