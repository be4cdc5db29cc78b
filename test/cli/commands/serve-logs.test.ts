import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { run as logs, readableLines } from '../../../src/cli/commands/serve/logs.ts';
import { EXIT } from '../../../src/cli/exit-codes.ts';
import { capturedContext } from '../../helpers/run-context.ts';

/** `serve logs` run() over a serve.log as a detached serve writes it (ready block, then pino). */
const dir = mkdtempSync(join(tmpdir(), 'agentctl-serve-logs-'));
const state = join(dir, 'state');
mkdirSync(state);
const T = Date.UTC(2026, 10, 26, 10, 0, 0, 123);
const LOG = [
  'admin token: the one printed at its first start (kept, hashed, in the state)',
  'agentctl sandbox listening on http://127.0.0.1:8787',
  JSON.stringify({
    level: 30,
    time: T,
    pid: 1,
    hostname: 'h',
    reqId: 'req-1',
    req: { method: 'GET', url: '/health', remoteAddress: '127.0.0.1' },
    msg: 'incoming request',
  }),
  JSON.stringify({
    level: 30,
    time: T + 2,
    pid: 1,
    hostname: 'h',
    reqId: 'req-1',
    res: { statusCode: 200 },
    responseTime: 1.6,
    msg: 'request completed',
  }),
  JSON.stringify({
    level: 40,
    time: T + 5,
    pid: 1,
    hostname: 'h',
    msg: 'standby restarted',
    block: 42,
    err: { message: 'anvil exited' },
  }),
  JSON.stringify({
    level: 30,
    time: T + 9,
    pid: 1,
    hostname: 'h',
    reqId: 'req-2',
    req: { method: 'POST', url: '/sandbox/fund' },
    msg: 'incoming request',
  }),
];
writeFileSync(join(state, 'serve.log'), `${LOG.join('\n')}\n`);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

function context(json = false) {
  const { context: made, text } = capturedContext(
    { json },
    { AGENTCTL_CONFIG_DIR: join(dir, 'config') },
  );
  return { context: made, stdout: () => text.stdout };
}

describe('serve logs', () => {
  it('--format human: ISO time, level and message; a request is one line once answered', async () => {
    const { context: ctx, stdout } = context();
    await logs({ state, lines: undefined, follow: false, format: 'human' }, ctx);
    expect(stdout().split('\n')).toEqual([
      LOG[0],
      LOG[1],
      '2026-11-26T10:00:00.125Z info  GET /health 200 2 ms',
      '2026-11-26T10:00:00.128Z warn  standby restarted: anvil exited (block=42)',
      '2026-11-26T10:00:00.132Z info  POST /sandbox/fund (came in, not answered yet)',
      '',
    ]);
    expect(stdout()).not.toContain(String(T));
  });

  it("--format json: the lines as written, and -n counts the file's lines", async () => {
    const { context: ctx, stdout } = context();
    await logs({ state, lines: 2, follow: false, format: 'json' }, ctx);
    expect(stdout()).toBe(`${LOG.slice(-2).join('\n')}\n`);
  });

  it('says which log is missing (exit 2)', async () => {
    const { context: ctx } = context();
    await expect(
      logs({ state: join(dir, 'none'), lines: undefined, follow: false, format: 'human' }, ctx),
    ).rejects.toMatchObject({ exitCode: EXIT.usage });
  });

  it('--follow prints what is appended, whole lines only', async () => {
    const { context: ctx, stdout } = context();
    const stop = new AbortController();
    const path = join(state, 'serve.log');
    const following = logs(
      { state, lines: 1, follow: true, format: 'json', pollMs: 10, signal: stop.signal },
      ctx,
    );
    // Following once the last line is out.
    await until(() => stdout().length > 0);
    expect(stdout()).toBe(`${LOG.at(-1)}\n`);
    writeFileSync(path, `${LOG.join('\n')}\na whole line\nhalf a li`);
    await until(() => stdout().includes('a whole line'));
    // A plain line is wrapped as JSON, as every line is with --format json.
    expect(stdout()).toBe(`${LOG.at(-1)}\n{"msg":"a whole line"}\n`);
    writeFileSync(path, `${LOG.join('\n')}\na whole line\nhalf a line\n`);
    await until(() => stdout().includes('half a line'));
    expect(stdout()).toBe(`${LOG.at(-1)}\n{"msg":"a whole line"}\n{"msg":"half a line"}\n`);
    stop.abort();
    await following;
    writeFileSync(path, `${LOG.join('\n')}\n`);
  });
});

describe('serve logs --format json', () => {
  it('--format json: every line is JSON, the ready block wrapped as {"msg": …}', async () => {
    const { context: ctx, stdout } = context(true);
    await logs({ state, lines: undefined, follow: false, format: 'json' }, ctx);
    const lines = stdout().trim().split('\n');
    expect(lines).toHaveLength(LOG.length);
    expect(lines.slice(0, 2).map((line) => JSON.parse(line))).toEqual([
      { msg: LOG[0] },
      { msg: LOG[1] },
    ]);
    expect(lines.slice(2)).toEqual(LOG.slice(2));
  });
});

/** A pino line of serve's request log. */
function entry(ms: number, msg: string, fields: Record<string, unknown>): string {
  return JSON.stringify({ level: 30, time: T + ms, pid: 1, hostname: 'h', msg, ...fields });
}

describe('readableLines, in time order', () => {
  const iso = (ms: number) => new Date(T + ms).toISOString();

  it('shows a request never answered (a WebSocket upgrade) where it came in, not at the end', async () => {
    const path = join(state, 'serve.log');
    writeFileSync(
      path,
      `${[
        entry(0, 'incoming request', { reqId: 'ws', req: { method: 'GET', url: '/graphql' } }),
        entry(1000, 'incoming request', { reqId: 'a', req: { method: 'GET', url: '/health' } }),
        entry(1001, 'request completed', { reqId: 'a', res: { statusCode: 200 }, responseTime: 1 }),
        entry(60_000, 'standby restarted', {}),
      ].join('\n')}\n`,
    );
    try {
      const { context: ctx, stdout } = context();
      await logs({ state, lines: undefined, follow: false, format: 'human' }, ctx);
      expect(stdout().split('\n')).toEqual([
        `${iso(0)} info  GET /graphql (came in, not answered yet)`,
        `${iso(1001)} info  GET /health 200 1 ms`,
        `${iso(60_000)} info  standby restarted`,
        '',
      ]);
    } finally {
      writeFileSync(path, `${LOG.join('\n')}\n`);
    }
  });

  it('a request answered after other lines: its arrival in place, its answer in place', () => {
    const reader = readableLines();
    const shown = [
      entry(0, 'incoming request', { reqId: 'slow', req: { method: 'POST', url: '/x' } }),
      entry(5, 'incoming request', { reqId: 'fast', req: { method: 'GET', url: '/y' } }),
      entry(6, 'request completed', { reqId: 'fast', res: { statusCode: 200 }, responseTime: 1 }),
      entry(1500, 'request completed', {
        reqId: 'slow',
        res: { statusCode: 201 },
        responseTime: 1500,
      }),
    ].flatMap((line) => reader.line(line));
    expect([...shown, ...reader.unanswered()]).toEqual([
      `${iso(0)} info  POST /x (came in, not answered yet)`,
      `${iso(6)} info  GET /y 200 1 ms`,
      `${iso(1500)} info  POST /x 201 1500 ms (came in at ${iso(0)})`,
    ]);
  });
});

describe('readableLines', () => {
  it('keeps at most 1024 requests waiting for their answer', () => {
    const reader = readableLines();
    for (let i = 0; i < 1100; i++) {
      reader.line(
        JSON.stringify({
          level: 30,
          time: T,
          reqId: `r${i}`,
          req: { method: 'GET', url: `/${i}` },
          msg: 'incoming request',
        }),
      );
    }
    // Each was shown as it came in, but the last, shown at the end.
    expect(reader.unanswered()).toHaveLength(1);
    // An answer whose request was let go still gets a line, named by its id.
    expect(
      reader.line(
        JSON.stringify({
          level: 30,
          time: T,
          reqId: 'r0',
          res: { statusCode: 200 },
          responseTime: 1,
          msg: 'request completed',
        }),
      ),
    ).toEqual(['2026-11-26T10:00:00.123Z info  (r0) 200 1 ms']);
  });
});

async function until(done: () => boolean): Promise<void> {
  while (!done()) await new Promise((resolve) => setTimeout(resolve, 10));
}
