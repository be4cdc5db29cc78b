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
      '2026-11-26T10:00:00.132Z info  POST /sandbox/fund (no answer logged yet)',
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
    expect(stdout()).toBe(`${LOG.at(-1)}\na whole line\n`);
    writeFileSync(path, `${LOG.join('\n')}\na whole line\nhalf a line\n`);
    await until(() => stdout().includes('half a line'));
    expect(stdout()).toBe(`${LOG.at(-1)}\na whole line\nhalf a line\n`);
    stop.abort();
    await following;
    writeFileSync(path, `${LOG.join('\n')}\n`);
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
    expect(reader.unanswered()).toHaveLength(1024);
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
    ).toBe('2026-11-26T10:00:00.123Z info  (r0) 200 1 ms');
  });
});

async function until(done: () => boolean): Promise<void> {
  while (!done()) await new Promise((resolve) => setTimeout(resolve, 10));
}
