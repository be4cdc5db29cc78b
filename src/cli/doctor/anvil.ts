import { execFile } from 'node:child_process';
import { accessSync, constants, statSync } from 'node:fs';
import { delimiter, isAbsolute, join } from 'node:path';
import { type Check, passed, problem } from './check.ts';

/** `anvil --version` answers at once; longer means something is wrong with that binary. */
const VERSION_TIMEOUT_MS = 5_000;

/** An executable file named `binary` in one of PATH's directories, as a shell would find it. */
export function findOnPath(binary: string, path: string | undefined): string | undefined {
  for (const dir of (path ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, binary);
    try {
      if (!statSync(candidate).isFile()) continue;
      if (process.platform !== 'win32') accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // Not there, or not executable: the shell would go on looking too.
    }
  }
  return undefined;
}

/** The version `anvil --version` prints ("anvil Version: 1.7.1\nCommit SHA: …"). */
export function anvilVersionOf(output: string): string | undefined {
  return /Version:\s*v?([\w.+-]+)/i.exec(output)?.[1] ?? /\d+\.\d+\.\d+\S*/.exec(output)?.[0];
}

function runVersion(binary: string): Promise<{ output: string } | { failure: string }> {
  return new Promise((resolve) => {
    execFile(
      binary,
      ['--version'],
      { timeout: VERSION_TIMEOUT_MS, killSignal: 'SIGKILL', windowsHide: true },
      (error, stdout, stderr) => {
        if (!error) return resolve({ output: stdout });
        const { code, killed } = error as { code?: unknown; killed?: boolean };
        const why = killed
          ? `gave no answer within ${VERSION_TIMEOUT_MS / 1000} s`
          : code === 'EACCES'
            ? 'is not executable'
            : typeof code === 'number'
              ? `exited with ${code}${stderr.trim() ? `: ${stderr.trim().split('\n')[0]}` : ''}`
              : error.message;
        resolve({ failure: `\`${binary} --version\` ${why}` });
      },
    );
  });
}

/**
 * anvil as `serve` finds it (AGENTCTL_ANVIL_PATH, else the platform's npm package, else PATH),
 * through serve's own lookup, and its version from `anvil --version`.
 */
export async function checkAnvil(env: NodeJS.ProcessEnv): Promise<Check> {
  // The sandbox's chain module is large: loaded only here, not by every command.
  const {
    ANVIL_VERSION,
    AnvilMissingError,
    anvilInstallCommand,
    anvilPackage,
    resolveAnvilBinary,
  } = await import('../../sandbox/chain/anvil.ts');
  const pkg = anvilPackage();
  const install = `\`${anvilInstallCommand()}\` where agentctl is installed (add -g for a global install), or set AGENTCTL_ANVIL_PATH to an anvil binary`;
  let resolved: string;
  try {
    resolved = resolveAnvilBinary(env);
  } catch (error) {
    if (!(error instanceof AnvilMissingError)) throw error;
    return problem(
      'anvil',
      `AGENTCTL_ANVIL_PATH is ${env.AGENTCTL_ANVIL_PATH}, which does not exist`,
      `point AGENTCTL_ANVIL_PATH at an anvil binary, or \`unset AGENTCTL_ANVIL_PATH\` to use the npm package ${pkg}`,
      { path: env.AGENTCTL_ANVIL_PATH, source: 'AGENTCTL_ANVIL_PATH' },
    );
  }
  const source = env.AGENTCTL_ANVIL_PATH
    ? 'AGENTCTL_ANVIL_PATH'
    : isAbsolute(resolved)
      ? `npm package ${pkg}`
      : 'PATH';
  const path = source === 'PATH' ? findOnPath(resolved, env.PATH) : resolved;
  if (path === undefined) {
    return problem(
      'anvil',
      `not found: AGENTCTL_ANVIL_PATH is not set, the npm package ${pkg} is not installed, and there is no anvil on PATH (serve needs one, unless --rpc-url)`,
      `install it: ${install}`,
      { path: null, source: null, package: pkg },
    );
  }
  const run = await runVersion(path);
  if ('failure' in run) {
    return problem(
      'anvil',
      `${path} (${source}) does not run: ${run.failure}`,
      source === 'AGENTCTL_ANVIL_PATH'
        ? `point AGENTCTL_ANVIL_PATH at a working anvil binary, or \`unset AGENTCTL_ANVIL_PATH\` to use the npm package ${pkg}`
        : `reinstall it: ${install}`,
      { path, source, package: pkg },
    );
  }
  const version = anvilVersionOf(run.output) ?? run.output.trim().split('\n')[0] ?? '';
  const tested = version.startsWith(ANVIL_VERSION)
    ? ''
    : ` (agentctl is tested with ${ANVIL_VERSION})`;
  return passed('anvil', `anvil ${version} at ${path} (${source})${tested}`, {
    path,
    source,
    version,
    package: pkg,
  });
}
