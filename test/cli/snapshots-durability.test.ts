import { createHash } from 'node:crypto';
import { readFileSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { gunzipSync, gzipSync } from 'node:zlib';
import { english, generateMnemonic } from 'viem/accounts';
import { describe, expect, it } from 'vitest';
import {
  depositOver,
  registerOver,
  requestOver,
  rpcCall,
  type ServeProcess,
  serveFailure,
  useServes,
} from '../helpers/serve.ts';

/**
 * Snapshots on a real `agentctl serve --state`: a restore is durable (kill -9 just after its
 * answer), a kill -9 during one gives the state before or after it and never a mix, and an
 * exported snapshot starts a new sandbox (`serve --from`), refusing damaged files.
 */
const TOKEN = 'snapshot-durability-token';
const { dir, serve, stop } = useServes('snapshots', TOKEN);

const admin = (running: ServeProcess, method: string, path: string, body?: object) =>
  requestOver(running.url, TOKEN, method, path, body);
const keyWorks = async (running: ServeProcess, apiKey: string) =>
  (await fetch(`${running.url}/api/v1/agent/wallet`, { headers: { 'x-api-key': apiKey } })).status;
const head = async (running: ServeProcess) => {
  const info = await admin(running, 'GET', '/sandbox/info');
  return Number(await rpcCall(info.body.rpc_url, 'eth_blockNumber'));
};

/** A sandbox with Alice and a deposit in snapshot `base`, then Bob and more after it. */
async function divergedFromBase(state: string, env: NodeJS.ProcessEnv = {}) {
  const running = await serve(['--state', state], env);
  const alice = await registerOver(running.url, 'Alice');
  await depositOver(running.url, alice.apiKey, 40);
  const taken = await admin(running, 'POST', '/sandbox/snapshots', { name: 'base' });
  expect(taken.status).toBe(200);
  const bob = await registerOver(running.url, 'Bob');
  await depositOver(running.url, bob.apiKey, 7);
  await depositOver(running.url, alice.apiKey, 3);
  expect(await head(running)).toBeGreaterThan(taken.body.block_number);
  return { running, alice, bob, base: taken.body as { block_number: number } };
}

describe('restore durability', () => {
  it('keeps a restore that was answered, across kill -9 and a restart', async () => {
    const state = join(dir(), 'state');
    const { running, alice, bob, base } = await divergedFromBase(state);
    const restored = await admin(running, 'POST', '/sandbox/snapshots/base/restore');
    expect(restored.status).toBe(200);
    await stop(running, 'SIGKILL');

    const again = await serve(['--state', state]);
    expect(await head(again)).toBe(base.block_number);
    expect(await keyWorks(again, bob.apiKey)).toBe(401);
    expect(await keyWorks(again, alice.apiKey)).toBe(200);
    // And it goes on from there.
    await depositOver(again.url, alice.apiKey, 1);
    expect(await head(again)).toBe(base.block_number + 1);
  });

  it('gives the state after the restore when killed once it has said what it restores, and keeps its Idempotency-Key', async () => {
    const state = join(dir(), 'state');
    const { running, alice, bob, base } = await divergedFromBase(state, {
      AGENTCTL_SANDBOX_FAULT: 'crash-in-restore',
    });
    const key = 'restore-base-once';
    const keyedRestore = (to: ServeProcess) =>
      fetch(`${to.url}/sandbox/snapshots/base/restore`, {
        method: 'POST',
        headers: { 'x-admin-token': TOKEN, 'idempotency-key': key },
      });
    await expect(keyedRestore(running)).rejects.toThrow();
    expect(await running.exited).toBe('SIGKILL');
    await stop(running);

    const again = await serve(['--state', state]);
    expect(await head(again)).toBe(base.block_number);
    expect(await keyWorks(again, bob.apiKey)).toBe(401);
    expect(await keyWorks(again, alice.apiKey)).toBe(200);
    // The start that finished the restore put its key in with its rows: a retry is answered,
    // and does not restore again over a deposit made since.
    await depositOver(again.url, alice.apiKey, 2);
    const retried = await keyedRestore(again);
    expect(retried.status).toBe(200);
    expect(retried.headers.get('idempotent-replayed')).toBe('true');
    expect(await retried.json()).toMatchObject({ name: 'base', block_number: base.block_number });
    expect(await head(again)).toBe(base.block_number + 1);
    const listed = await admin(again, 'GET', '/sandbox/snapshots');
    expect(listed.body.snapshots.map((entry: { name: string }) => entry.name)).toEqual([
      'genesis',
      'base',
    ]);
  });

  it('gives the state before the restore when killed before it changed anything', async () => {
    const state = join(dir(), 'state');
    const { running, alice, bob } = await divergedFromBase(state, {
      AGENTCTL_SANDBOX_FAULT: 'crash-before-restore',
    });
    const before = await head(running);
    await expect(admin(running, 'POST', '/sandbox/snapshots/base/restore')).rejects.toThrow();
    expect(await running.exited).toBe('SIGKILL');
    await stop(running);

    const again = await serve(['--state', state]);
    expect(await head(again)).toBe(before);
    expect(await keyWorks(again, bob.apiKey)).toBe(200);
    expect(await keyWorks(again, alice.apiKey)).toBe(200);
    await depositOver(again.url, bob.apiKey, 1);
  });
});

describe('export and serve --from', () => {
  it('starts a new sandbox from an exported snapshot, and refuses damaged files', async () => {
    const state = join(dir(), 'state');
    const { running, alice, bob, base } = await divergedFromBase(state);
    const exported = await fetch(`${running.url}/sandbox/snapshots/base/export`, {
      headers: { 'x-admin-token': TOKEN },
    });
    expect(exported.status).toBe(200);
    expect(exported.headers.get('content-type')).toBe('application/octet-stream');
    const file = join(dir(), 'base.sandbox');
    writeFileSync(file, Buffer.from(await exported.arrayBuffer()), { mode: 0o600 });
    const missing = await fetch(`${running.url}/sandbox/snapshots/nope/export`, {
      headers: { 'x-admin-token': TOKEN },
    });
    expect(missing.status).toBe(404);
    await stop(running);

    // A temporary sandbox from it: Alice's key (hashed in the file) works; Bob's never existed.
    const started = await serve(['--from', file]);
    expect(await head(started)).toBe(base.block_number);
    expect(await keyWorks(started, alice.apiKey)).toBe(200);
    expect(await keyWorks(started, bob.apiKey)).toBe(401);
    await depositOver(started.url, alice.apiKey, 2);
    // The snapshot comes with it: a CI job restores it before each test.
    const restored = await admin(started, 'POST', '/sandbox/snapshots/base/restore');
    expect(restored.status).toBe(200);
    expect(await head(started)).toBe(base.block_number);
    await stop(started);

    // Into a new --state dir; an existing one that is not empty is refused.
    const fresh = join(dir(), 'fresh');
    const persistent = await serve(['--from', file, '--state', fresh]);
    expect(await keyWorks(persistent, alice.apiKey)).toBe(200);
    expect(statSync(join(fresh, 'wallet.mnemonic')).mode & 0o777).toBe(0o600);
    await stop(persistent);
    const notEmpty = await serveFailure(['--from', file, '--state', fresh, '--port', '0']);
    expect(notEmpty.code).not.toBe(0);
    expect(notEmpty.stderr).toContain(`${fresh} is not empty`);

    // Damaged, truncated, another format: refused, naming the file, with nothing written.
    const bytes = readFileSync(file);
    const damaged = join(dir(), 'damaged.sandbox');
    const flipped = Buffer.from(bytes);
    flipped[Math.floor(flipped.length / 2)] = (flipped[Math.floor(flipped.length / 2)] ?? 0) ^ 0xff;
    writeFileSync(damaged, flipped);
    const truncated = join(dir(), 'truncated.sandbox');
    writeFileSync(truncated, bytes);
    truncateSync(truncated, Math.floor(bytes.length / 2));
    const other = join(dir(), 'other.sandbox');
    const body = JSON.parse(gunzipSync(bytes).toString('utf8'));
    writeFileSync(other, gzipSync(JSON.stringify({ ...body, format: 99 })));
    // Hand-edited, checksums right: the parts no longer make one sandbox.
    const edited = (name: string, edit: (copy: typeof body) => void) => {
      const copy = structuredClone(body);
      edit(copy);
      for (const entry of Object.values(copy.files) as Array<{ sha256: string; base64: string }>) {
        entry.sha256 = createHash('sha256')
          .update(Buffer.from(entry.base64, 'base64'))
          .digest('hex');
      }
      const path = join(dir(), `${name}.sandbox`);
      writeFileSync(path, gzipSync(JSON.stringify(copy)));
      return path;
    };
    const otherMnemonic = edited('other-mnemonic', (copy) => {
      copy.mnemonic = generateMnemonic(english);
    });
    const otherBlock = edited('other-block', (copy) => {
      copy.block_number += 1;
    });
    const otherSchema = edited('other-schema', (copy) => {
      const path = join(dir(), 'schema.db');
      writeFileSync(path, Buffer.from(copy.files['sandbox.db'].base64, 'base64'));
      const db = new DatabaseSync(path);
      db.exec('CREATE TABLE from_a_later_version (x INTEGER)');
      db.close();
      copy.files['sandbox.db'].base64 = readFileSync(path).toString('base64');
    });
    const named = edited('named-genesis', (copy) => {
      copy.name = 'genesis';
    });
    const bomb = join(dir(), 'bomb.sandbox');
    writeFileSync(bomb, gzipSync(Buffer.alloc(300 * 1024 * 1024)));
    for (const [path, why] of [
      [damaged, /damaged/],
      [truncated, /truncated/],
      [other, /format 99, but this agentctl reads format 1/],
      [otherMnemonic, /do not belong together \(its mnemonic is not the one/],
      [otherBlock, /do not belong together \(.*block/],
      [otherSchema, /do not belong together \(its sandbox.db its table from_a_later_version/],
      [named, /genesis/],
      [bomb, /unpacks to more than/],
    ] as const) {
      const target = join(dir(), `from-${basename(path)}`);
      const refused = await serveFailure(['--from', path, '--state', target, '--port', '0']);
      expect(refused.code, path).not.toBe(0);
      expect(refused.stderr).toContain(`--from ${path}`);
      expect(refused.stderr).toMatch(why);
      expect(refused.stderr).toContain('nothing was written');
      expect(() => statSync(target)).toThrow();
    }
  });
});
