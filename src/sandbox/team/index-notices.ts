import pg from 'pg';
import type { Sql } from '../store/sql.ts';

/**
 * Index commits announced across processes: the writer NOTIFYs each committed block, replicas
 * LISTEN and publish to their own subscribers. PostgreSQL queues a NOTIFY with its transaction
 * and delivers it only once that commits, in commit order, and never for a rollback: a replica
 * told "block N" can read block N. NOTIFY may still lose messages (a listener's connection
 * drops, its queue overflows), so after each (re)connect the listener is told of a gap: read
 * everything committed since the last block published.
 */

/** The channel; its payload is the block number, in decimal. */
export const INDEX_CHANNEL = 'agentctl_index';

/** Delays before connecting again, doubled from the first to the last, then kept. */
const RECONNECT_FIRST_MS = 100;
const RECONNECT_MAX_MS = 5000;

/**
 * Announces block `block` as indexed: call inside the index commit's transaction (`tx`), so
 * that the notice goes out when, and only if, the commit does.
 */
export async function announceIndexed(tx: Sql, block: number): Promise<void> {
  await tx.get('SELECT pg_notify(?, ?)', INDEX_CHANNEL, String(block));
}

export interface IndexedHandlers {
  /** Block `block` and those before it are committed. Awaited: blocks meanwhile coalesce. */
  onBlock(block: number): void | Promise<void>;
  /**
   * Notices may have been lost (the listener has just connected, or connected again): read
   * what was committed since the last block published. Awaited, as onBlock.
   */
  onGap(): void | Promise<void>;
  /** The connection failed or could not be made (it is tried again): for the log. */
  onDisconnect?(error: Error): void;
}

/**
 * Runs handlers one at a time, with at most one of each pending: a gap, and the highest block
 * announced while a handler ran (the blocks before it are in it). Whatever the notices' rate,
 * what waits is two values. A handler's failure is its own to handle (a replica whose gap read
 * failed reads again): it is dropped here, and the next value is delivered.
 */
export function createCoalescingDelivery(handlers: Pick<IndexedHandlers, 'onBlock' | 'onGap'>) {
  let gapPending = false;
  let blockPending: number | undefined;
  let running = false;
  let idle: Promise<void> = Promise.resolve();

  const drain = async () => {
    running = true;
    try {
      while (gapPending || blockPending !== undefined) {
        if (gapPending) {
          gapPending = false;
          // A gap's read covers every block committed before it: none pending is left to tell.
          blockPending = undefined;
          await settled(() => handlers.onGap());
        } else {
          const block = blockPending as number;
          blockPending = undefined;
          await settled(() => handlers.onBlock(block));
        }
      }
    } finally {
      running = false;
    }
  };
  const settled = async (handler: () => void | Promise<void>) => {
    try {
      await handler();
    } catch {
      // See above: the handler's to handle.
    }
  };
  const start = () => {
    if (!running) idle = drain();
  };
  return {
    block(block: number): void {
      blockPending = Math.max(blockPending ?? block, block);
      start();
    },
    gap(): void {
      gapPending = true;
      start();
    },
    /** Resolves once no handler runs and nothing is pending. */
    idle: (): Promise<void> => idle,
  };
}

export interface IndexListener {
  /** Stops listening: no handler is called once it resolves, and no connection is left open. */
  close(): Promise<void>;
}

/**
 * LISTENs for index commits on a dedicated connection to `url`, connecting again (after 0.1 s,
 * doubling up to 5 s) whenever it is lost; calls onGap after each connect, once LISTEN is in
 * place (what commits later is announced; what committed before is the gap's to read).
 */
export function listenIndexed(url: string, handlers: IndexedHandlers): IndexListener {
  const delivery = createCoalescingDelivery(handlers);
  let closed = false;
  let client: pg.Client | undefined;
  let connecting: Promise<void> | undefined;
  let retry: NodeJS.Timeout | undefined;
  let delayMs = RECONNECT_FIRST_MS;

  const connectLater = (error: Error) => {
    if (closed || retry) return;
    handlers.onDisconnect?.(error);
    retry = setTimeout(() => {
      retry = undefined;
      connecting = connect();
    }, delayMs);
    delayMs = Math.min(delayMs * 2, RECONNECT_MAX_MS);
  };

  const connect = async (): Promise<void> => {
    const next = new pg.Client({ connectionString: url, application_name: 'agentctl listener' });
    client = next;
    const lost = (error: Error) => {
      if (client !== next) return;
      client = undefined;
      next.end().catch(() => undefined);
      connectLater(error);
    };
    next.on('error', lost);
    next.on('end', () => lost(new Error('the connection ended')));
    next.on('notification', (message) => {
      if (closed || client !== next || message.channel !== INDEX_CHANNEL) return;
      const block = Number(message.payload);
      if (Number.isSafeInteger(block) && block >= 0) delivery.block(block);
    });
    try {
      await next.connect();
      await next.query(`LISTEN ${INDEX_CHANNEL}`);
    } catch (error) {
      lost(error as Error);
      return;
    }
    if (closed || client !== next) return;
    delayMs = RECONNECT_FIRST_MS;
    delivery.gap();
  };

  connecting = connect();
  return {
    async close() {
      closed = true;
      clearTimeout(retry);
      retry = undefined;
      await connecting;
      const last = client;
      client = undefined;
      await last?.end().catch(() => undefined);
      await delivery.idle();
    },
  };
}
