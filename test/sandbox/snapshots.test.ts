import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
} from 'node:fs';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { erc20Abi } from 'viem';
import { beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { CLOSE_SANDBOX_RESTORED, MAX_SNAPSHOTS } from '../../src/api/schemas/index.ts';
import {
  commitSnapshot,
  newSnapshotDir,
  removeSnapshot,
} from '../../src/sandbox/snapshots/files.ts';
import { call, chainAgent, chainReader, useChainSandbox } from '../helpers/chain.ts';
import { ADMIN_TOKEN, admin, type TestSandbox, testBackend } from '../helpers/sandbox.ts';
import { until } from '../helpers/serve.ts';

/**
 * Snapshots and restores on a real sandbox: the chain, sandbox.db, index.db and the clock
 * go back together, and the sandbox goes on from there.
 */
let sandbox: TestSandbox;
let wsUrl = '';
useChainSandbox((started) => {
  sandbox = started;
});
beforeAll(async () => {
  const address = await sandbox.app.listen({ host: '127.0.0.1', port: 0 });
  wsUrl = `${address.replace(/^http/, 'ws')}/graphql`;
});

/** A snapshot's directory and files are the owner's alone, and hold what a restore needs. */
function expectPrivateSnapshotFiles(name: string) {
  const dir = join(sandbox.dir, 'snapshots');
  expect(statSync(dir).mode & 0o777).toBe(0o700);
  expect(statSync(join(dir, name)).mode & 0o777).toBe(0o700);
  for (const file of readdirSync(join(dir, name))) {
    expect(statSync(join(dir, name, file)).mode & 0o777, file).toBe(0o600);
  }
  expect(readdirSync(join(dir, name)).sort()).toEqual([
    'chain.json',
    'index.db',
    'sandbox.db',
    'snapshot.json',
  ]);
}

const GRAPHQL_READ = '{ vaults { address tvl totalShares pricePerShare } }';
const graphql = async () =>
  (
    await sandbox.app.inject({ method: 'POST', url: '/graphql', payload: { query: GRAPHQL_READ } })
  ).json();

/** A subscriber on a real WebSocket: resolves with how its socket was closed. */
async function subscriber(): Promise<{ closed: Promise<{ code: number; reason: string }> }> {
  const socket = new WebSocket(wsUrl, 'graphql-transport-ws');
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    socket.once('close', (code, reason) => resolve({ code, reason: String(reason) })),
  );
  await new Promise((resolve, reject) => {
    socket.once('open', resolve);
    socket.once('error', reject);
  });
  const acked = new Promise((resolve) =>
    socket.on('message', (data) => {
      if (JSON.parse(String(data)).type === 'connection_ack') resolve(undefined);
    }),
  );
  socket.send(JSON.stringify({ type: 'connection_init' }));
  await acked;
  socket.send(
    JSON.stringify({
      id: '1',
      type: 'subscribe',
      payload: { query: 'subscription { transactionCreated { hash } }' },
    }),
  );
  return { closed };
}

const snapshotAs = (name: string, replace?: boolean) =>
  admin(sandbox.app, 'POST', '/sandbox/snapshots', {
    name,
    ...(replace !== undefined && { replace }),
  });
const restore = (name: string) => admin(sandbox.app, 'POST', `/sandbox/snapshots/${name}/restore`);
const blockNumber = async () => Number(await chainReader(sandbox).getBlockNumber());
const position = async (apiKey: string) =>
  (await call(sandbox, apiKey, 'GET', '/api/v1/agent/vault/positions')).json();
const deposit = (apiKey: string, amount: number) =>
  call(sandbox, apiKey, 'POST', '/api/v1/agent/vault/deposit', {
    vault_id: 'moderate',
    amount_usdc: amount,
  });

describe('snapshots', () => {
  it('refuses bad names, an existing name without replace, and touching genesis', async () => {
    for (const name of ['', '.', '..', 'a/b', 'x'.repeat(65), 'sp ace']) {
      const refused = await snapshotAs(name);
      expect(refused.statusCode, name).toBe(400);
      expect(refused.json().error).toMatch(/name/);
    }
    expect((await snapshotAs('genesis')).statusCode).toBe(409);
    expect((await snapshotAs('first')).statusCode).toBe(200);
    const again = await snapshotAs('first');
    expect(again.statusCode).toBe(409);
    expect(again.json().error).toMatch(/replace/);
    expect((await snapshotAs('first', true)).statusCode).toBe(200);
    const deleteGenesis = await sandbox.app.inject({
      method: 'DELETE',
      url: '/sandbox/snapshots/genesis',
      headers: { 'x-admin-token': ADMIN_TOKEN },
    });
    expect(deleteGenesis.statusCode).toBe(409);
    expect((await restore('nothing-here')).statusCode).toBe(404);
    const unauthorised = await sandbox.app.inject({ method: 'GET', url: '/sandbox/snapshots' });
    expect(unauthorised.statusCode).toBe(401);
  });

  it('restores the chain, the agents, the index and the clock as they were', async () => {
    const alice = await chainAgent(sandbox, 'established');
    expect((await deposit(alice.apiKey, 100)).statusCode).toBe(200);
    const proposed = await admin(sandbox.app, 'POST', '/sandbox/proposals', {
      title: 'Before the snapshot',
      description: 'Voted on only after it.',
    });
    expect(proposed.statusCode).toBe(200);
    const proposalId = proposed.json().proposal_id;
    const taken = await snapshotAs('with-alice');
    expect(taken.statusCode).toBe(200);
    const snapshot = taken.json();
    const at = await blockNumber();
    expect(snapshot).toMatchObject({ name: 'with-alice', block_number: at });
    expect(snapshot.size_bytes).toBeGreaterThan(0);
    // (On PostgreSQL a snapshot is a schema: snapshots-postgres.test.ts.)
    if (!sandbox.database) expectPrivateSnapshotFiles('with-alice');
    const strategies = async () =>
      (await call(sandbox, alice.apiKey, 'GET', '/api/v1/agent/strategy/list')).json();
    const proposals = async () => (await sandbox.app.inject({ url: '/api/v1/proposals' })).json();
    const before = {
      strategies: await strategies(),
      proposals: await proposals(),
      position: await position(alice.apiKey),
      vaults: (await sandbox.app.inject({ url: '/v1/vaults' })).json(),
      graphql: await graphql(),
      clock: (await admin(sandbox.app, 'GET', '/sandbox/info')).json().clock,
    };
    expect(before.graphql.data.vaults.length).toBeGreaterThan(0);

    // Afterwards: another agent, another deposit, 30 days on.
    const bob = await chainAgent(sandbox);
    expect((await deposit(alice.apiKey, 50)).statusCode).toBe(200);
    const submitted = await call(sandbox, alice.apiKey, 'POST', '/api/v1/agent/strategy/submit', {
      name: 'After the snapshot',
      description: 'Gone once restored.',
    });
    expect(submitted.statusCode, submitted.body).toBe(200);
    const voted = await call(sandbox, alice.apiKey, 'POST', '/api/v1/agent/governance/vote', {
      proposal_id: proposalId,
      support: 1,
    });
    expect(voted.statusCode, voted.body).toBe(200);
    expect(await strategies()).not.toEqual(before.strategies);
    expect(await proposals()).not.toEqual(before.proposals);
    expect((await deposit(bob.apiKey, 10)).statusCode).toBe(200);
    const advanced = await admin(sandbox.app, 'POST', '/sandbox/clock/advance', {
      seconds: 30 * 86_400,
    });
    expect(advanced.statusCode).toBe(200);
    expect(await blockNumber()).toBeGreaterThan(at);
    expect(await graphql()).not.toEqual(before.graphql);
    const { closed } = await subscriber();

    const restored = await restore('with-alice');
    expect(restored.statusCode, restored.body).toBe(200);
    expect(restored.json()).toMatchObject({ name: 'with-alice', block_number: at });
    expect(restored.json().restored_in_ms).toBeGreaterThan(0);

    expect(await blockNumber()).toBe(at);
    // Bob's key was issued after the snapshot; Alice's before.
    expect((await call(sandbox, bob.apiKey, 'GET', '/api/v1/agent/wallet')).statusCode).toBe(401);
    expect((await call(sandbox, alice.apiKey, 'GET', '/api/v1/agent/wallet')).statusCode).toBe(200);
    expect(await position(alice.apiKey)).toEqual(before.position);
    expect(await strategies()).toEqual(before.strategies);
    expect(await proposals()).toEqual(before.proposals);
    expect((await sandbox.app.inject({ url: '/v1/vaults' })).json()).toEqual(before.vaults);
    expect(await graphql()).toEqual(before.graphql);
    // What subscribers were told no longer holds: their sockets are closed, saying why.
    expect(await closed).toEqual({ code: CLOSE_SANDBOX_RESTORED, reason: 'Sandbox restored' });
    const clock = (await admin(sandbox.app, 'GET', '/sandbox/info')).json().clock;
    expect(clock.offset_seconds).toBe(before.clock.offset_seconds);
    // Bob's server-side wallet holds nothing on the restored chain.
    const usdc = sandbox.chain.deployment.usdc;
    const bobsUsdc = await chainReader(sandbox).readContract({
      address: usdc,
      abi: erc20Abi,
      functionName: 'balanceOf',
      args: [bob.agentAddress],
    });
    expect(bobsUsdc).toBe(0n);

    // The next write goes on from the snapshot's block, with the wallets' nonces read again.
    expect((await deposit(alice.apiKey, 5)).statusCode).toBe(200);
    expect(await blockNumber()).toBe(at + 1);
    const carol = await chainAgent(sandbox);
    expect((await deposit(carol.apiKey, 1)).statusCode).toBe(200);
    // What the restore put in the state dir is as private as the rest.
    if (!sandbox.database) {
      const chainFiles = readdirSync(join(sandbox.dir, 'chain')).map((file) => join('chain', file));
      for (const file of ['sandbox.db', 'index.db', ...chainFiles]) {
        expect(statSync(join(sandbox.dir, file)).mode & 0o777, file).toBe(0o600);
      }
    }
  });

  it('restores genesis: a new, empty sandbox in the same state dir', async () => {
    const restored = await restore('genesis');
    expect(restored.statusCode, restored.body).toBe(200);
    expect(restored.json().block_number).toBe(await blockNumber());
    const stats = (await sandbox.app.inject({ url: '/api/v1/agents/stats' })).json();
    expect(stats.total_agents).toBe(0);
    const listed = (await admin(sandbox.app, 'GET', '/sandbox/snapshots')).json().snapshots;
    expect(listed.map((entry: { name: string }) => entry.name)).toEqual([
      'genesis',
      'first',
      'with-alice',
    ]);
    // The snapshots survive it; the sandbox works.
    const dave = await chainAgent(sandbox);
    expect((await deposit(dave.apiKey, 2)).statusCode).toBe(200);
    expect((await restore('with-alice')).statusCode).toBe(200);
    expect((await call(sandbox, dave.apiKey, 'GET', '/api/v1/agent/wallet')).statusCode).toBe(401);
  });

  it('refuses writes with 503 while it restores, and a write answered before belongs to the state before', async () => {
    const erin = await chainAgent(sandbox);
    expect((await snapshotAs('before-burst')).statusCode).toBe(200);
    const deposits = async () =>
      (
        await sandbox.app.inject({
          method: 'POST',
          url: '/graphql',
          payload: {
            query: `{ userTransactions(address: "${erin.agentAddress}", type: DEPOSIT) { hash } }`,
          },
        })
      ).json().data.userTransactions.length;
    expect(await deposits()).toBe(0);
    // The order in which answers arrive: the restore's among the deposits'.
    let arrived = 0;
    const burst = Array.from({ length: 12 }, (_, i) =>
      new Promise((resolve) => setTimeout(resolve, i * 15))
        .then(() => deposit(erin.apiKey, 1))
        .then((answer) => ({ answer, order: arrived++ })),
    );
    const restored = restore('before-burst').then((answer) => ({ answer, order: arrived++ }));
    const answers = (await Promise.all(burst)).map(({ answer }) => answer);
    const restoreAnswer = await restored;
    expect(restoreAnswer.answer.statusCode).toBe(200);
    const statuses = answers.map((answer) => answer.statusCode);
    expect(
      statuses.every((status) => status === 200 || status === 503),
      String(statuses),
    ).toBe(true);
    expect(statuses).toContain(503);
    for (const refused of answers.filter((answer) => answer.statusCode === 503)) {
      expect(refused.headers['retry-after']).toBe('1');
      expect(refused.json().error).toMatch(/restored/);
    }
    // A deposit answered 200 before the restore answered belongs to the state before it, and
    // is gone; one answered after it is in the restored state.
    const ordered = await Promise.all(burst);
    const after = ordered.filter(
      ({ answer, order }) => answer.statusCode === 200 && order > restoreAnswer.order,
    ).length;
    expect(await deposits()).toBe(after);
  });

  it('takes concurrent requests one at a time: one of two snapshots of a name, every restore', async () => {
    const [one, two] = await Promise.all([snapshotAs('raced'), snapshotAs('raced')]);
    expect([one?.statusCode, two?.statusCode].sort()).toEqual([200, 409]);
    const restores = await Promise.all([restore('raced'), restore('raced'), restore('genesis')]);
    expect(restores.map((answer) => answer.statusCode)).toEqual([200, 200, 200]);
    expect(restores[2]?.json().name).toBe('genesis');
    const stats = (await sandbox.app.inject({ url: '/api/v1/agents/stats' })).json();
    expect(stats.total_agents).toBe(0);
  });

  // The next four damage or make a snapshot's files: on PostgreSQL a snapshot is a schema,
  // and snapshots-postgres.test.ts does the same to it.
  it.skipIf(testBackend() === 'postgres')(
    'refuses, changing nothing, a snapshot whose sandbox.db is of another schema',
    async () => {
      const frank = await chainAgent(sandbox);
      expect((await snapshotAs('other-schema')).statusCode).toBe(200);
      const copy = new DatabaseSync(join(sandbox.dir, 'snapshots', 'other-schema', 'sandbox.db'));
      copy.exec('CREATE TABLE from_a_later_version (x INTEGER)');
      copy.close();
      const at = await blockNumber();
      const refused = await restore('other-schema');
      expect(refused.statusCode).toBe(409);
      expect(refused.json().error).toMatch(/another agentctl version.*nothing was changed/);
      expect(existsSync(join(sandbox.dir, 'restoring.json'))).toBe(false);
      expect(await blockNumber()).toBe(at);
      expect((await deposit(frank.apiKey, 1)).statusCode).toBe(200);
    },
  );

  it.skipIf(testBackend() === 'postgres')(
    "restores a snapshot of an earlier agentctl's schema, brought up to date on a copy",
    async () => {
      const hana = await chainAgent(sandbox);
      expect((await snapshotAs('earlier-schema')).statusCode).toBe(200);
      // What version 5 (before Idempotency-Key) wrote: no idempotency_keys table, nor the
      // rate counts of version 7.
      const path = join(sandbox.dir, 'snapshots', 'earlier-schema', 'sandbox.db');
      const copy = new DatabaseSync(path);
      copy.exec('DROP TABLE idempotency_keys; DROP TABLE rate_counts; PRAGMA user_version = 5');
      copy.close();
      expect((await deposit(hana.apiKey, 1)).statusCode).toBe(200);
      const restored = await restore('earlier-schema');
      expect(restored.statusCode, restored.body).toBe(200);
      // The agent is back, and keyed writes work on the restored state.
      const keyed = await sandbox.app.inject({
        method: 'POST',
        url: '/api/v1/agent/vault/deposit',
        headers: { 'x-api-key': hana.apiKey, 'idempotency-key': 'after-an-old-snapshot' },
        payload: { vault_id: 'moderate', amount_usdc: 1 },
      });
      expect(keyed.statusCode, keyed.body).toBe(200);
      expect(keyed.headers['idempotent-replayed']).toBe('false');
      // The snapshot's own file is left as it was.
      const after = new DatabaseSync(path, { readOnly: true });
      expect(after.prepare('PRAGMA user_version').get()).toEqual({ user_version: 5 });
      after.close();
      expect(readdirSync(sandbox.dir).filter((file) => file.startsWith('upgrading-'))).toEqual([]);
    },
  );

  it.skipIf(testBackend() === 'postgres')(
    'restores a snapshot whose index.db cannot be put in place, and indexes the chain again',
    async () => {
      const gina = await chainAgent(sandbox);
      expect((await deposit(gina.apiKey, 3)).statusCode).toBe(200);
      expect((await snapshotAs('bad-index')).statusCode).toBe(200);
      const stats = async () => sandbox.app.inject({ url: '/v1/protocol/stats' });
      const before = (await stats()).json();
      // The fault: a directory where the snapshot's index.db is.
      const index = join(sandbox.dir, 'snapshots', 'bad-index', 'index.db');
      rmSync(index);
      mkdirSync(index);
      expect((await deposit(gina.apiKey, 4)).statusCode).toBe(200);
      const restored = await restore('bad-index');
      expect(restored.statusCode, restored.body).toBe(200);
      // Answered from the chain once indexed again (503 INDEX_UNAVAILABLE, never a 500, until then).
      await until(async () => {
        const answer = await stats();
        expect([200, 503]).toContain(answer.statusCode);
        return answer.statusCode === 200 && answer.json().transactions === before.transactions;
      });
      expect((await stats()).json()).toEqual(before);
      expect((await deposit(gina.apiKey, 1)).statusCode).toBe(200);
    },
  );

  it('forgets when nodes were seen after the snapshot: the restored clock is earlier', async () => {
    const made = await admin(sandbox.app, 'POST', '/sandbox/nodes', {
      name: 'Seen later',
      operator_address: '0x000000000000000000000000000000000000dEaD',
    });
    expect(made.statusCode).toBe(200);
    const { node_id: id, node_key: key } = made.json();
    expect((await snapshotAs('node-unseen')).statusCode).toBe(200);
    const lastSeen = async () =>
      (await sandbox.app.inject({ url: '/v1/nodes' }))
        .json()
        .nodes.find((node: { id: string }) => node.id === id)?.lastSeen;
    expect(await lastSeen()).toBeNull();
    const used = await sandbox.app.inject({ url: '/v1/vaults', headers: { 'x-api-key': key } });
    expect(used.statusCode).toBe(200);
    expect(await lastSeen()).not.toBeNull();
    expect((await restore('node-unseen')).statusCode).toBe(200);
    expect(await lastSeen()).toBeNull();
  });

  it.skipIf(testBackend() === 'postgres')(
    `keeps at most ${MAX_SNAPSHOTS} snapshots: one more is refused until one is deleted`,
    async () => {
      // Filled up to the bound with snapshot directories as the sandbox writes them (copies of
      // a real one), rather than 100 snapshots taken one by one.
      const source = join(sandbox.dir, 'snapshots', 'first');
      const held =
        (await admin(sandbox.app, 'GET', '/sandbox/snapshots')).json().snapshots.length - 1;
      for (let i = held; i < MAX_SNAPSHOTS; i++) {
        const dir = newSnapshotDir(sandbox.dir, `filler-${i}`);
        copyFileSync(join(source, 'chain.json'), join(dir, 'chain.json'));
        const meta = JSON.parse(readFileSync(join(source, 'snapshot.json'), 'utf8'));
        await commitSnapshot(sandbox.dir, dir, { ...meta, name: `filler-${i}` });
      }
      const listed = (await admin(sandbox.app, 'GET', '/sandbox/snapshots')).json().snapshots;
      expect(listed).toHaveLength(MAX_SNAPSHOTS + 1);
      const refused = await snapshotAs('one-too-many');
      expect(refused.statusCode).toBe(409);
      expect(refused.json().error).toMatch(/at most 100 snapshots/);
      // Replacing one is not one more.
      expect((await snapshotAs('first', true)).statusCode).toBe(200);
      const deleted = await sandbox.app.inject({
        method: 'DELETE',
        url: `/sandbox/snapshots/filler-${MAX_SNAPSHOTS - 1}`,
        headers: { 'x-admin-token': ADMIN_TOKEN },
      });
      expect(deleted.statusCode).toBe(200);
      expect((await snapshotAs('one-too-many')).statusCode).toBe(200);
      for (let i = held; i < MAX_SNAPSHOTS - 1; i++) removeSnapshot(sandbox.dir, `filler-${i}`);
    },
  );

  it('deletes a snapshot', async () => {
    const deleted = await sandbox.app.inject({
      method: 'DELETE',
      url: '/sandbox/snapshots/first',
      headers: { 'x-admin-token': ADMIN_TOKEN },
    });
    expect(deleted.statusCode).toBe(200);
    expect(deleted.json()).toEqual({ name: 'first', deleted: true });
    if (!sandbox.database) expect(existsSync(join(sandbox.dir, 'snapshots', 'first'))).toBe(false);
    const again = await sandbox.app.inject({
      method: 'DELETE',
      url: '/sandbox/snapshots/first',
      headers: { 'x-admin-token': ADMIN_TOKEN },
    });
    expect(again.statusCode).toBe(404);
  });
});
