import { mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  MAX_PENDING_REGISTRATIONS,
  openPendingRegistrations,
  PENDING_REGISTRATION_TTL_MS,
} from '../../src/config/pending-registrations.ts';

/** The registrations a rerun with its key sends again: kept per service, wallet and key, bounded. */

const ORIGIN = 'http://127.0.0.1:8788';
const WALLET = '0xAbC0000000000000000000000000000000000001';
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function store(start = Date.parse('2026-11-26T12:00:00Z')) {
  const dir = mkdtempSync(join(tmpdir(), 'agentctl-pending-'));
  dirs.push(dir);
  const clock = { now: start };
  return { clock, kept: openPendingRegistrations(dir, () => clock.now) };
}

const body = (n: number) => ({ agent_name: `Agent ${n}`, nonce: `${n}`.padStart(64, '0') });

describe('pending registrations', () => {
  it('are found by service, wallet (any case) and key only; files 0600 in a 0700 dir, named without the key', () => {
    const { kept } = store();
    kept.save(ORIGIN, WALLET, 'ci-key-1', body(1));
    expect(kept.find(ORIGIN, WALLET.toLowerCase(), 'ci-key-1')).toMatchObject({
      origin: ORIGIN,
      wallet: WALLET.toLowerCase(),
      body: body(1),
    });
    expect(kept.find(ORIGIN, WALLET, 'ci-key-2')).toBeUndefined();
    expect(kept.find('http://127.0.0.1:8789', WALLET, 'ci-key-1')).toBeUndefined();
    expect(kept.find(ORIGIN, WALLET.replace(/1$/, '2'), 'ci-key-1')).toBeUndefined();
    const [name] = readdirSync(kept.dir);
    expect(name).toMatch(/^[0-9a-f]{64}\.json$/);
    expect(statSync(kept.dir).mode & 0o777).toBe(0o700);
    expect(statSync(join(kept.dir, name as string)).mode & 0o777).toBe(0o600);
    kept.remove(ORIGIN, WALLET, 'ci-key-1');
    expect(readdirSync(kept.dir)).toEqual([]);
  });

  it(`keep at most ${MAX_PENDING_REGISTRATIONS}: the oldest is dropped for another`, () => {
    const { clock, kept } = store();
    for (let n = 1; n <= MAX_PENDING_REGISTRATIONS + 2; n++) {
      clock.now += 1000;
      kept.save(ORIGIN, WALLET, `key-${n}`, body(n));
    }
    expect(readdirSync(kept.dir)).toHaveLength(MAX_PENDING_REGISTRATIONS);
    expect(kept.find(ORIGIN, WALLET, 'key-1')).toBeUndefined();
    expect(kept.find(ORIGIN, WALLET, 'key-2')).toBeUndefined();
    expect(kept.find(ORIGIN, WALLET, 'key-3')?.body).toEqual(body(3));
    expect(kept.find(ORIGIN, WALLET, `key-${MAX_PENDING_REGISTRATIONS + 2}`)?.body).toEqual(
      body(MAX_PENDING_REGISTRATIONS + 2),
    );
    // Saving one again under its own key takes no one else's place.
    kept.save(ORIGIN, WALLET, 'key-3', body(3));
    expect(readdirSync(kept.dir)).toHaveLength(MAX_PENDING_REGISTRATIONS);
    expect(kept.find(ORIGIN, WALLET, 'key-4')?.body).toEqual(body(4));
  });

  it('expire with the service’s 24 h retention of answers: not found, and removed', () => {
    const { clock, kept } = store();
    kept.save(ORIGIN, WALLET, 'old', body(1));
    clock.now += PENDING_REGISTRATION_TTL_MS - 1;
    kept.save(ORIGIN, WALLET, 'newer', body(2));
    expect(kept.find(ORIGIN, WALLET, 'old')?.body).toEqual(body(1));
    clock.now += 1;
    expect(kept.find(ORIGIN, WALLET, 'old')).toBeUndefined();
    expect(readdirSync(kept.dir)).toHaveLength(1);
    // Expired ones are also cleared when another is kept.
    clock.now += PENDING_REGISTRATION_TTL_MS;
    kept.save(ORIGIN, WALLET, 'latest', body(3));
    expect(readdirSync(kept.dir)).toHaveLength(1);
    expect(kept.find(ORIGIN, WALLET, 'latest')?.body).toEqual(body(3));
  });

  it('ignore a damaged file, and find nothing where there is no dir', () => {
    const { kept } = store();
    expect(kept.find(ORIGIN, WALLET, 'k')).toBeUndefined();
    kept.save(ORIGIN, WALLET, 'k', body(1));
    const [name] = readdirSync(kept.dir);
    writeFileSync(join(kept.dir, name as string), '{"origin": 1');
    expect(kept.find(ORIGIN, WALLET, 'k')).toBeUndefined();
  });
});
