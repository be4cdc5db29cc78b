import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ContractAddresses } from '../../api/schemas/index.ts';
import { StartupError } from '../errors.ts';
import type { Deployment } from './deployment.ts';

/** Where the sandbox keeps the addresses it deployed on an external dev chain. */
const DEPLOYMENT_FILE = 'deployment.json';

/** `--deployment FILE`, or the addresses this state dir deployed on an external dev chain. */
export function readDeployment(
  options: { stateDir: string; deploymentFile?: string },
  dev: boolean,
): { deployment: Deployment; path: string } | undefined {
  const path =
    options.deploymentFile ?? (dev ? join(options.stateDir, DEPLOYMENT_FILE) : undefined);
  if (!path || !existsSync(path)) {
    if (options.deploymentFile) throw new StartupError(`--deployment ${path}: no such file`);
    return undefined;
  }
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch {
    throw new StartupError(`${path} is not valid JSON`);
  }
  const parsed = ContractAddresses.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new StartupError(
      `${path} is not a deployment file: ${issue?.path.join('.') || 'it'}: ${issue?.message}`,
    );
  }
  return { deployment: parsed.data as Deployment, path };
}

/** Keeps the addresses deployed on an external dev chain, for the next start. */
export function writeDeployment(stateDir: string, deployment: Deployment): void {
  writeFileSync(join(stateDir, DEPLOYMENT_FILE), JSON.stringify(deployment), { mode: 0o600 });
}
