import { describe, expect, it } from 'vitest';
import { hashAdminToken } from '../../src/sandbox/plugins/auth.ts';
import {
  REDACTED,
  redactUrl,
  rpcUrlSecrets,
  scrubSecrets,
  secretForms,
} from '../../src/sandbox/plugins/logging.ts';

describe('the log scrub', () => {
  it('keeps public query values and redacts every other', () => {
    expect(redactUrl('/api/v1/agents?limit=5&api_key=agk_x&token')).toBe(
      `/api/v1/agents?limit=5&api_key=${REDACTED}&token`,
    );
  });

  it('removes a token it knows only by its hash (a --state sandbox restarted without it)', () => {
    const token = 'Sh_Bh3pUdK6piyYWg-JKfNARvlVtMpZx';
    const line = `{"url":"/sandbox/${token}/x","other":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`;
    const scrubbed = scrubSecrets(line, [], hashAdminToken(token));
    expect(scrubbed).not.toContain(token);
    expect(scrubbed).toContain('AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA');
  });

  it('removes a token as is, URL-encoded and JSON-escaped, and the secret parts of an RPC URL', () => {
    const forms = secretForms([
      'to"ken with/space',
      ...rpcUrlSecrets('https://u:p4ssw0rd!@rpc.example/v2/KEY1234567'),
    ]);
    const line = JSON.stringify({
      a: 'to"ken with/space',
      b: encodeURIComponent('to"ken with/space'),
      c: 'https://rpc.example/v2/KEY1234567',
    });
    const scrubbed = scrubSecrets(line, forms);
    expect(scrubbed).not.toMatch(/ken with|KEY1234567/);
  });
});
