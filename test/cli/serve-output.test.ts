import { describe, expect, it } from 'vitest';
import { startServe } from '../helpers/serve.ts';

/** serve's stdout is its ready block and nothing else; the log and notices go to stderr. */
describe("serve's own output", () => {
  it('prints only the ready block on stdout: no Fastify listening line, SIGTERM on stderr', async () => {
    const serve = await startServe(['--admin-token', 'output-test', '--log-format', 'json']);
    expect((await fetch(`${serve.url}/health`)).status).toBe(200);
    serve.child.kill('SIGTERM');
    expect(await serve.exited).toBe(0);
    expect(serve.stdout().split('\n')).toEqual([
      expect.stringMatching(/^state: \S+ \(temporary, removed at exit\)$/),
      expect.stringMatching(/^chain: http:\/\/\S+$/),
      `agentctl sandbox listening on ${serve.url}`,
      '',
    ]);
    expect(serve.stderr()).toContain('SIGTERM received, shutting down\n');
    expect(serve.stderr()).toContain('"url":"/health"');
    expect(serve.stderr()).not.toMatch(/listening/i);
  }, 60_000);
});
