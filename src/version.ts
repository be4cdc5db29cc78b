import { readFileSync } from 'node:fs';

/** package.json, read once (it is one level above both src/ and dist/). */
const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));

/** The package version. */
export const VERSION: string = manifest.version;

/** The Node.js versions the package supports: package.json's `engines.node` (">=22.22.2"). */
export const NODE_ENGINE: string = manifest.engines?.node ?? '';
