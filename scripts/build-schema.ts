/**
 * Writes schema.graphql: the GraphQL schema `agentctl serve` answers at /graphql, printed from
 * src/sandbox/graphql/schema.ts. test/sandbox/graphql.test.ts fails when the schema the
 * sandbox serves (read back by introspection) and the committed file differ.
 *
 *   node scripts/build-schema.ts          regenerate schema.graphql
 *   node scripts/build-schema.ts --check  exit 1 if it is out of date
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSchema, printSchema } from 'graphql';
import { SCHEMA_SDL } from '../src/sandbox/graphql/schema.ts';

const file = join(dirname(fileURLToPath(import.meta.url)), '..', 'schema.graphql');
const printed = `${printSchema(buildSchema(SCHEMA_SDL))}\n`;
if (process.argv.includes('--check')) {
  const committed = readFileSync(file, 'utf8');
  if (committed !== printed) {
    process.stderr.write('schema.graphql is out of date: run `npm run build:schema`\n');
    process.exit(1);
  }
} else {
  writeFileSync(file, printed);
  process.stdout.write(`wrote ${file}\n`);
}
