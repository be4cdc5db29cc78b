import { createHash } from 'node:crypto';
import {
  closeSync,
  existsSync,
  fsyncSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { gunzipSync, gzipSync } from 'node:zlib';
import { validateMnemonic } from '@scure/bip39';
import { wordlist } from '@scure/bip39/wordlists/english';
import { z } from 'zod';
import { GENESIS_SNAPSHOT, SANDBOX_EXPORT_FORMAT, SnapshotName } from '../../api/schemas/index.ts';
import { type Checkpoint, parseCheckpoint } from '../chain/checkpoint.ts';
import { META_CHECKPOINT } from '../chain/restore.ts';
import { mnemonicFingerprint, mnemonicPath, readMnemonic } from '../chain/wallets.ts';
import { HttpError, StartupError } from '../errors.ts';
import { SERVE_LOG_FILE } from '../options.ts';
import { openStore } from '../store/index.ts';
import {
  commitSnapshot,
  markRestoring,
  newSnapshotDir,
  readSnapshotMeta,
  SNAPSHOT_CHAIN,
  SNAPSHOT_DB,
  SNAPSHOT_INDEX,
  type SnapshotMeta,
  snapshotDir,
} from './files.ts';

/**
 * One snapshot as one file, to start another sandbox from (`serve --from`): gzipped JSON
 * holding the snapshot's description, its files (each with its SHA-256) and wallet.mnemonic,
 * from which every agent's server-side wallet derives. It is a secret: written 0600. API keys
 * stay hashed in it, so the keys a team's tests hold keep working against a sandbox started
 * from it.
 */

/** Largest export written or read: far above a sandbox of thousands of agents. */
export const MAX_EXPORT_BYTES = 256 * 1024 * 1024;
/** What the file says it is, before its format version. */
const KIND = 'agentctl-sandbox';

const ExportedFile = z.object({ sha256: z.string().regex(/^[0-9a-f]{64}$/), base64: z.string() });
const SandboxExport = z.object({
  kind: z.literal(KIND),
  format: z.literal(SANDBOX_EXPORT_FORMAT),
  name: SnapshotName,
  sandbox_id: z.string().min(1),
  block_number: z.number().int().nonnegative(),
  block_hash: z.string(),
  created_at: z.number().int(),
  mnemonic: z.string().min(1),
  files: z.object({
    [SNAPSHOT_DB]: ExportedFile,
    [SNAPSHOT_CHAIN]: ExportedFile,
    [SNAPSHOT_INDEX]: ExportedFile.optional(),
  }),
});
export type SandboxExport = z.infer<typeof SandboxExport>;

/** Snapshot `name` of the sandbox at `stateDir`, as the bytes of an export file. */
export function exportSnapshot(stateDir: string, name: string): Buffer {
  refuseGenesisExport(name);
  const meta = readSnapshotMeta(stateDir, name);
  if (!meta) throw new HttpError(404, `no snapshot is named ${name}`);
  const dir = snapshotDir(stateDir, name);
  const size = readdirSync(dir).reduce((sum, file) => sum + statSync(join(dir, file)).size, 0);
  refuseTooLarge(name, size);
  const files: Partial<Record<ExportedName, Buffer>> = {};
  for (const file of [SNAPSHOT_DB, SNAPSHOT_CHAIN, SNAPSHOT_INDEX] as const) {
    const path = join(dir, file);
    if (existsSync(path)) files[file] = readFileSync(path);
  }
  const mnemonic = readMnemonic(stateDir);
  if (mnemonic === undefined) throw new HttpError(503, `${mnemonicPath(stateDir)} is missing`);
  return exportBytes(meta, files as ExportedFiles, mnemonic);
}

/** The files an export holds, by name: index.db is absent when the index was not copied. */
type ExportedName = typeof SNAPSHOT_DB | typeof SNAPSHOT_CHAIN | typeof SNAPSHOT_INDEX;
export type ExportedFiles = Record<typeof SNAPSHOT_DB | typeof SNAPSHOT_CHAIN, Buffer> & {
  [SNAPSHOT_INDEX]?: Buffer;
};

/** Genesis is built in: never exported. */
export function refuseGenesisExport(name: string): void {
  if (name === GENESIS_SNAPSHOT) {
    throw new HttpError(
      400,
      'genesis is a new, empty sandbox: start `agentctl serve` without --from to get one',
    );
  }
}

/** Refuses a snapshot of `size` bytes whose export would pass MAX_EXPORT_BYTES. */
export function refuseTooLarge(name: string, size: number): void {
  if (size * 1.4 > MAX_EXPORT_BYTES) {
    throw new HttpError(400, `snapshot ${name} is too large to export (${size} bytes)`);
  }
}

/**
 * An export file's bytes: snapshot `meta`'s files (a SQLite sandbox.db and index.db, a
 * checkpoint file), each with its SHA-256, and the mnemonic, whichever storage kept them.
 */
export function exportBytes(meta: SnapshotMeta, files: ExportedFiles, mnemonic: string): Buffer {
  const entries: Record<string, { sha256: string; base64: string }> = {};
  for (const [file, bytes] of Object.entries(files)) {
    if (!bytes) continue;
    entries[file] = {
      sha256: createHash('sha256').update(bytes).digest('hex'),
      base64: bytes.toString('base64'),
    };
  }
  const body: SandboxExport = {
    kind: KIND,
    format: SANDBOX_EXPORT_FORMAT,
    name: meta.name,
    sandbox_id: meta.sandbox_id,
    block_number: meta.block_number,
    block_hash: meta.block_hash,
    created_at: meta.created_at,
    mnemonic,
    files: entries as SandboxExport['files'],
  };
  return gzipSync(JSON.stringify(body));
}

/**
 * Reads and checks an export file wholly, before anything is written: a file of another
 * format version, a damaged or a truncated one is refused, naming it.
 */
export async function readExport(file: string): Promise<SandboxExport> {
  const refuse = (why: string) => new StartupError(`--from ${file}: ${why}; nothing was written`);
  let raw: Buffer;
  try {
    if (statSync(file).size > MAX_EXPORT_BYTES) {
      throw refuse(`it is larger than ${MAX_EXPORT_BYTES} bytes, so not a sandbox export`);
    }
    raw = readFileSync(file);
  } catch (error) {
    if (error instanceof StartupError) throw error;
    throw refuse(
      `cannot be read (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`,
    );
  }
  let text: string;
  try {
    // Bounded: a small file that unpacks to gigabytes is refused, not unpacked.
    text = gunzipSync(raw, { maxOutputLength: MAX_EXPORT_BYTES }).toString('utf8');
  } catch (error) {
    const why = (error as Error).message;
    throw refuse(
      /unexpected end/i.test(why)
        ? 'it is truncated (its compressed data ends early)'
        : error instanceof RangeError
          ? `it unpacks to more than ${MAX_EXPORT_BYTES} bytes, so it is not a sandbox export`
          : `it is not a sandbox export, or it is damaged (${why})`,
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw refuse('it is damaged (its contents are not valid JSON)');
  }
  const header = parsed as { kind?: unknown; format?: unknown } | null;
  if (header?.kind !== KIND) throw refuse('it is not a sandbox export (agentctl sandbox export)');
  if (header.format !== SANDBOX_EXPORT_FORMAT) {
    throw refuse(
      `it has export format ${String(header.format)}, but this agentctl reads format ${SANDBOX_EXPORT_FORMAT}; export it again with this version`,
    );
  }
  const checked = SandboxExport.safeParse(parsed);
  if (!checked.success) {
    const issue = checked.error.issues[0];
    throw refuse(`it is damaged (${issue?.path.join('.') || 'it'}: ${issue?.message})`);
  }
  for (const [name, entry] of Object.entries(checked.data.files)) {
    if (!entry) continue;
    const digest = createHash('sha256').update(Buffer.from(entry.base64, 'base64')).digest('hex');
    if (digest !== entry.sha256) throw refuse(`it is damaged (${name} does not match its SHA-256)`);
  }
  if (checked.data.name === GENESIS_SNAPSHOT) {
    throw refuse('it names itself genesis, which is built in and never exported');
  }
  const inconsistent = await checkContent(checked.data);
  if (inconsistent) throw refuse(`its parts do not belong together (${inconsistent})`);
  return checked.data;
}

/**
 * Why the export's parts do not make one sandbox (a hand-edited or assembled file whose
 * checksums are right), or undefined: its chain and sandbox.db are at its block, sandbox.db is
 * of this version's schema, and all three name one sandbox and its mnemonic. Checked on copies
 * in a temporary directory, before anything is written to the state dir.
 */
async function checkContent(exported: SandboxExport): Promise<string | undefined> {
  const bytes = (entry: { base64: string }) => Buffer.from(entry.base64, 'base64');
  let chain: Checkpoint;
  try {
    chain = parseCheckpoint(
      bytes(exported.files[SNAPSHOT_CHAIN]).toString('utf8'),
      SNAPSHOT_CHAIN,
      exported.block_number,
    );
  } catch (error) {
    return (error as Error).message.replace(/; restore the state.*$/, '');
  }
  if (chain.block_hash !== exported.block_hash) return `${SNAPSHOT_CHAIN} is not at its block`;
  if (chain.sandbox_id !== exported.sandbox_id) return `${SNAPSHOT_CHAIN} is another sandbox's`;
  if (!validateMnemonic(exported.mnemonic, wordlist)) return 'its mnemonic is not BIP-39';
  const dir = mkdtempSync(join(tmpdir(), 'agentctl-import-'));
  try {
    const path = join(dir, SNAPSHOT_DB);
    writeFileSync(path, bytes(exported.files[SNAPSHOT_DB]), { mode: 0o600 });
    // This version's schema, in a database of its own, against the export's.
    const fresh = openStore(join(dir, 'fresh.db'), { durable: false });
    try {
      await fresh.checkReplaceable(path);
    } catch (error) {
      return `its ${SNAPSHOT_DB} ${(error as Error).message}`;
    } finally {
      await fresh.close();
    }
    const db = new DatabaseSync(path, { readOnly: true });
    try {
      const meta = (key: string) =>
        (
          db.prepare('SELECT value FROM meta WHERE key = ?').get(key) as
            | { value: string }
            | undefined
        )?.value;
      if (meta('sandbox_id') !== exported.sandbox_id) return `${SNAPSHOT_DB} is another sandbox's`;
      if (meta('mnemonic_fingerprint') !== mnemonicFingerprint(exported.mnemonic)) {
        return `its mnemonic is not the one ${SNAPSHOT_DB}'s agents' wallets derive from`;
      }
      const pointer = JSON.parse(meta(META_CHECKPOINT) ?? '{}') as {
        block?: number;
        hash?: string;
      };
      if (pointer.block !== exported.block_number || pointer.hash !== exported.block_hash) {
        return `${SNAPSHOT_DB} is not at its block`;
      }
    } finally {
      db.close();
    }
  } catch (error) {
    return `its ${SNAPSHOT_DB} cannot be read (${(error as Error).message})`;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return undefined;
}

/**
 * Makes `stateDir` (new and empty) a sandbox that starts as the export in it: the snapshot is
 * written under its name, with wallet.mnemonic, and marked as a restore to finish, which the
 * start then does (snapshots/index.ts resumeRestore).
 */
export async function importExport(exported: SandboxExport, stateDir: string): Promise<void> {
  // Said first: a start that finds it, and no snapshot, knows the import was cut short.
  markRestoring(stateDir, exported.name);
  const fd = openSync(mnemonicPath(stateDir), 'wx', 0o600);
  try {
    writeFileSync(fd, `${exported.mnemonic}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  const dir = newSnapshotDir(stateDir, exported.name);
  for (const [name, entry] of Object.entries(exported.files)) {
    if (entry) writeFileSync(join(dir, name), Buffer.from(entry.base64, 'base64'), { mode: 0o600 });
  }
  await commitSnapshot(stateDir, dir, {
    format: 1,
    name: exported.name,
    sandbox_id: exported.sandbox_id,
    block_number: exported.block_number,
    block_hash: exported.block_hash,
    created_at: exported.created_at,
  });
}

/**
 * Refuses a --state dir for --from that holds anything: a sandbox is never overwritten. The
 * log alone is not state: `serve --from FILE --detach` opens it in the new dir before it
 * starts this serve there.
 */
export function checkEmptyForImport(stateDir: string): void {
  let held: string[];
  try {
    held = existsSync(stateDir) ? readdirSync(stateDir) : [];
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOTDIR') {
      throw new StartupError(
        `--from: ${stateDir} is not a directory; give --state a new or empty directory`,
      );
    }
    // Not readable: opening the state dir says why, and what to do.
    return;
  }
  if (held.some((entry) => entry !== SERVE_LOG_FILE)) {
    throw new StartupError(
      `--from: ${stateDir} is not empty; give a new or empty --state directory (a sandbox is never overwritten)`,
    );
  }
}
