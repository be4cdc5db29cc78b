import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { openConfig } from '../../src/config/profiles.ts';

let dir: string;
let file: string;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'agentctl-profiles-'));
  file = join(dir, 'config.json');
});
afterEach(() => rmSync(dir, { recursive: true, force: true }));

const open = () => openConfig({ AGENTCTL_CONFIG_DIR: dir });
const stored = () => JSON.parse(readFileSync(file, 'utf8'));

describe('openConfig', () => {
  it('lives in AGENTCTL_CONFIG_DIR, else in the platform config dir', async () => {
    expect(open()).toMatchObject({ path: file, dir, keystoreDir: join(dir, 'keystores') });
    if (process.platform === 'linux') {
      expect(openConfig({}).path).toBe(join(homedir(), '.config', 'agentctl', 'config.json'));
      expect(openConfig({ XDG_CONFIG_HOME: dir }).path).toBe(join(dir, 'agentctl', 'config.json'));
    }
  });

  it('reads a missing file as no profiles, and a read writes nothing', async () => {
    const nested = join(dir, 'not', 'yet');
    const config = openConfig({ AGENTCTL_CONFIG_DIR: nested });
    expect(config.profileNames()).toEqual([]);
    expect(config.get('default')).toEqual({});
    expect(existsSync(nested)).toBe(false);
  });

  it('writes the file on the first set, mode 0600, in a directory it creates', async () => {
    const nested = join(dir, 'new');
    await openConfig({ AGENTCTL_CONFIG_DIR: nested }).set('default', {
      base_url: 'http://a.example',
    });
    const path = join(nested, 'config.json');
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(JSON.parse(readFileSync(path, 'utf8'))).toEqual({
      profiles: { default: { base_url: 'http://a.example' } },
    });
    expect(readdirSync(nested)).toEqual(['config.json']);
  });

  it('merges a set into the profile, unsets one key, and reads back what it wrote', async () => {
    const config = open();
    await config.set('work', { base_url: 'http://w.example', api_key: 'agk_work' });
    await config.set('work', { keystore: 'trader' });
    await config.set('default', { data_url: 'http://d.example' });
    await config.unset('work', 'api_key');
    expect(config.get('work')).toEqual({ base_url: 'http://w.example', keystore: 'trader' });
    expect(open().profileNames()).toEqual(['default', 'work']);
    expect(open().get('default')).toEqual({ data_url: 'http://d.example' });
  });

  it("keeps a change another process made since it was opened, and keys it doesn't know", async () => {
    writeFileSync(file, JSON.stringify({ version: 2, profiles: { a: { extra: 'x' } } }));
    const config = open();
    await open().set('b', { base_url: 'http://b.example' });
    await config.set('a', { api_key: 'agk_a' });
    expect(stored()).toEqual({
      version: 2,
      profiles: { a: { extra: 'x', api_key: 'agk_a' }, b: { base_url: 'http://b.example' } },
    });
  });

  it('gives a file others could read back mode 0600 on the next write', async () => {
    writeFileSync(file, '{"profiles":{}}');
    chmodSync(file, 0o644);
    await open().set('default', { api_key: 'agk_secret' });
    expect(statSync(file).mode & 0o777).toBe(0o600);
  });

  it('reads a file an editor saved with a byte order mark', async () => {
    writeFileSync(file, '\uFEFF{"profiles":{"default":{"base_url":"http://bom.example"}}}');
    expect(open().get('default')).toEqual({ base_url: 'http://bom.example' });
  });

  it('writes through a config.json that is a symbolic link', async () => {
    const elsewhere = join(dir, 'dotfiles');
    mkdirSync(elsewhere);
    writeFileSync(join(elsewhere, 'agentctl.json'), '{"profiles":{}}');
    symlinkSync(join(elsewhere, 'agentctl.json'), file);
    await open().set('default', { base_url: 'http://link.example' });
    expect(JSON.parse(readFileSync(join(elsewhere, 'agentctl.json'), 'utf8'))).toEqual({
      profiles: { default: { base_url: 'http://link.example' } },
    });
    expect(open().get('default')).toEqual({ base_url: 'http://link.example' });
  });

  it('reports a file that is not JSON, naming it without quoting it, and leaves it alone', async () => {
    const damaged = '{"profiles": {"default": {"api_key": "agk_secret"';
    writeFileSync(file, damaged);
    expect(open).toThrow(`The config file \`${file}\` is not valid JSON.`);
    expect(open).not.toThrow(/agk_secret/);
    expect(readFileSync(file, 'utf8')).toBe(damaged);
  });

  it.each([
    ['[]', 'it is not a JSON object'],
    ['"text"', 'it is not a JSON object'],
    ['{"profiles": []}', '"profiles" is not an object'],
    ['{"profiles": {"default": "x"}}', 'profile "default" is not an object'],
    ['{"profiles": {"ci": {"base_url": 8787}}}', 'base_url of profile "ci" is not a string'],
  ])('reports JSON that is not a configuration (%s), and leaves it alone', (text, problem) => {
    writeFileSync(file, text);
    expect(open).toThrow(`The config file \`${file}\` is not a configuration: ${problem}.`);
    expect(readFileSync(file, 'utf8')).toBe(text);
  });
});
