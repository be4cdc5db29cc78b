import { createServer } from 'node:net';
import { GraphQLError } from 'graphql';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { formatGraphqlErrors, fromQueryError } from '../../src/sandbox/graphql/errors.ts';
import { throttledUnreachableLog } from '../../src/sandbox/plugins/errors.ts';

/** A real failure to reach PostgreSQL: pg connecting to a loopback port nothing listens on. */
async function unreachableError(): Promise<Error> {
  const port = await new Promise<number>((resolve) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
  const client = new pg.Client({ connectionString: `postgres://nobody@127.0.0.1:${port}/none` });
  return client.connect().then(
    () => {
      throw new Error('connected to nothing');
    },
    (error: Error) => error,
  );
}

describe('GraphQL errors of a database that cannot be reached', () => {
  it('are INDEX_UNAVAILABLE (503), never internal errors', async () => {
    const failure = await unreachableError();
    const mapped = fromQueryError(failure) as GraphQLError;
    expect(mapped).toBeInstanceOf(GraphQLError);
    expect(mapped.extensions.code).toBe('INDEX_UNAVAILABLE');
    expect(mapped.message).toMatch(
      /^the sandbox's database cannot be reached \(connection refused\); retry shortly$/,
    );
    // A resolver that let the error through: the formatter says the same.
    const logged: unknown[] = [];
    const { statusCode, response } = formatGraphqlErrors(
      {
        data: null,
        errors: [new GraphQLError(failure.message, { originalError: failure, path: ['vaults'] })],
      },
      { error: (object) => logged.push(object) },
    );
    expect(statusCode).toBe(503);
    expect(response.errors?.[0]?.extensions?.code).toBe('INDEX_UNAVAILABLE');
    expect(response.errors?.[0]?.message).toBe(mapped.message);
    expect(logged).toEqual([]);
  });
});

describe('the log of requests failed on an unreachable database', () => {
  it('writes the first of each window, then says how many it left out', () => {
    let now = 1_000;
    const log = throttledUnreachableLog(10_000, () => now);
    const lines: unknown[] = [];
    const logger = { warn: (object: unknown) => lines.push(object) };
    const failure = new Error('connect ECONNREFUSED 127.0.0.1:5432');
    for (let i = 0; i < 500; i++) log(logger, failure);
    expect(lines).toEqual([{ err: failure }]);
    now += 10_000;
    log(logger, failure);
    expect(lines).toEqual([{ err: failure }, { err: failure, not_logged_since_last: 499 }]);
  });
});
