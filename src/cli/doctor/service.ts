import { networkReason } from '../../api/client.ts';
import { Health } from '../../api/schemas/health.ts';
import { createTransport, type Exchange } from '../../api/transport.ts';
import { type Check, passed, problem } from './check.ts';

/** One try per request, bounded: doctor never waits on a service for long. */
export const NETWORK_TIMEOUT_MS = 3_000;

/** Status words that mean healthy, as `agentctl health` judges them (the sandbox says "ok"). */
const HEALTHY = new Set(['ok', 'healthy', 'up', 'pass']);

/** Which URL a check is about, and where its value came from (as `config list` says it). */
export interface ServiceTarget {
  name: 'base_url' | 'data_url';
  url: string;
  source: string;
  /** The profile in effect, for a `config set` fix. */
  profile: string;
  /** The profile was named (flag or env): a fix must name it too. */
  profileNamed: boolean;
}

/** How the user points `target` elsewhere, as one command or flag for a fix line. */
export function changeUrlHint(target: ServiceTarget): string {
  const flag = target.name === 'base_url' ? '--base-url' : '--data-url';
  const variable = target.name === 'base_url' ? 'AGENTCTL_BASE_URL' : 'AGENTCTL_DATA_URL';
  if (target.source.startsWith('flag')) return `pass the service's URL with ${flag} <url>`;
  if (target.source.startsWith('env')) return `set ${variable} to the service's URL`;
  const profile = target.profileNamed ? `--profile ${target.profile} ` : '';
  return `\`agentctl ${profile}config set ${target.name} <url>\``;
}

function isLoopback(url: URL): boolean {
  return ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname);
}

/**
 * A fix for a service that does not answer: on this machine, start a sandbox there; but when
 * something took the connection and gave no answer in time, the port is taken: find what.
 */
function unreachableFix(target: ServiceTarget, url: URL, timedOut: boolean): string {
  const port = url.port || (url.protocol === 'https:' ? '443' : '80');
  if (timedOut && isLoopback(url)) {
    return `something answers on port ${port}, but not as an agentctl service in time: check what listens there (\`lsof -i :${port}\` or \`ss -ltnp 'sport = :${port}'\`), or point to a running service: ${changeUrlHint(target)}`;
  }
  if (timedOut) {
    return `the service took the connection but gave no answer in time: try again later, or point to the right service: ${changeUrlHint(target)}`;
  }
  if (isLoopback(url) && url.protocol === 'http:') {
    const host = url.hostname === '[::1]' ? ' --host ::1' : '';
    return `start a sandbox there: \`agentctl serve${host} --port ${url.port || '80'}\`; or point to a running service: ${changeUrlHint(target)}`;
  }
  return `check the network, or point to the right service: ${changeUrlHint(target)}`;
}

/**
 * An answer that is not what was expected, by its status and content type: never its body
 * (an HTML page would take many lines).
 */
function gist(exchange: Exchange): string {
  const type = String(exchange.headers['content-type'] ?? 'no content type').split(';')[0];
  return `HTTP ${exchange.status} (${type})`;
}

function parseObject(text: string): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(text);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** A wait that will end, given by Retry-After in seconds. */
function retryAfter(exchange: Exchange): string {
  const seconds = Number(exchange.headers['retry-after']);
  return Number.isFinite(seconds) && seconds > 0 ? ` (in ${Math.ceil(seconds)} s)` : '';
}

/** The service's own error message in a JSON error body, when it has one. */
function errorMessage(text: string): string | undefined {
  const body = parseObject(text);
  const error = body?.error;
  const nested =
    typeof error === 'object' && error !== null ? (error as Record<string, unknown>) : undefined;
  const message = typeof error === 'string' ? error : (nested?.message ?? body?.message);
  return typeof message === 'string' ? message.replace(/\s+/g, ' ').slice(0, 200) : undefined;
}

/** A problem for an answer to GET /health that is not a health body. */
function notHealth(target: ServiceTarget, health: Exchange, sandbox: boolean): Check {
  const where = `${target.url} (${target.source}) answers GET /health with ${gist(health)}`;
  const location = health.headers.location;
  if (health.status >= 300 && health.status < 400 && typeof location === 'string') {
    const moved = new URL(location, `${target.url.replace(/\/+$/, '')}/health`);
    const suggested = moved.href.replace(/\/health\/?$/, '');
    return problem(
      target.name,
      `${where}, redirecting to ${moved.href}`,
      `use the URL it redirects to (${suggested}): ${changeUrlHint(target)}`,
    );
  }
  const message = errorMessage(health.text);
  const said = message ? `: ${message}` : '';
  if (health.status === 429) {
    return problem(
      target.name,
      `${where}${said}`,
      `wait${retryAfter(health)}, then run \`agentctl doctor\` again`,
    );
  }
  if (health.status >= 500) {
    return problem(
      target.name,
      `${where}${said}`,
      sandbox
        ? "see why in the sandbox's log (`agentctl serve logs --state <dir>`), or restart it"
        : 'wait, then run `agentctl doctor` again; if it stays so, tell the service operator',
    );
  }
  return problem(
    target.name,
    `${where}, not a service's health: is it an agentctl service?`,
    `point to the agent-vault service or a sandbox (\`agentctl serve\` prints its URL): ${changeUrlHint(target)}`,
  );
}

/**
 * A service's URL: that it answers, its `/health` (ok, or degraded with a reason), and
 * whether it is a sandbox. The sandbox stamps every answer with `X-Sandbox-Time`; the live
 * service does not, and that is fine: it is "not a sandbox", never a problem. A data API
 * without `/health` (the planned live one may have none) is accepted when `/v1` answers.
 */
export async function checkService(
  target: ServiceTarget,
  userAgent: string,
  timeoutMs = NETWORK_TIMEOUT_MS,
): Promise<Check> {
  const facts = { url: target.url, source: target.source };
  let url: URL;
  try {
    url = new URL(target.url);
    if (!['http:', 'https:'].includes(url.protocol) || !url.hostname) throw new Error();
  } catch {
    return problem(
      target.name,
      `${JSON.stringify(target.url)} (${target.source}) is not an http(s) URL`,
      changeUrlHint(target),
      { ...facts, reachable: false, sandbox: null, status: null },
    );
  }
  const transport = createTransport();
  const base = target.url.replace(/\/+$/, '');
  const get = (path: string) =>
    transport.exchange(`${base}${path}`, {
      method: 'GET',
      headers: { 'user-agent': userAgent, accept: 'application/json' },
      timeoutMs,
      connectTimeoutMs: timeoutMs,
    });
  try {
    let health: Exchange;
    try {
      health = await get('/health');
    } catch (error) {
      const reason = networkReason(error);
      return problem(
        target.name,
        `cannot reach ${target.url} (${target.source}): ${reason.text}`,
        unreachableFix(target, url, reason.timedOut),
        { ...facts, reachable: false, sandbox: null, status: null },
      );
    }
    const sandbox = health.headers['x-sandbox-time'] !== undefined;
    const kind = sandbox ? 'a sandbox' : 'not a sandbox';
    const reached = { ...facts, reachable: true, sandbox };
    const body = health.status === 200 ? parseObject(health.text) : undefined;
    if (typeof body?.status !== 'string') {
      if (target.name === 'data_url' && health.status === 404) {
        const stats = await get('/v1/protocol/stats').catch(() => undefined);
        if (stats?.status === 200 && parseObject(stats.text)) {
          return passed(
            target.name,
            `${target.url} (${target.source}): the data API answers (it has no /health), ${kind}`,
            { ...reached, status: null },
          );
        }
      }
      return { ...notHealth(target, health, sandbox), ...reached, status: null };
    }
    const where = `${target.url} (${target.source})`;
    // The same contract `agentctl health` reads: a body of another shape is not a service's health.
    const parsed = Health.safeParse(body);
    if (!parsed.success) {
      const fields = [
        ...new Set(parsed.error.issues.map((issue) => issue.path.join('.') || 'body')),
      ];
      return problem(
        target.name,
        `${where} answers GET /health with a body that is not the health of an agentctl service (${fields.join(', ')} missing or of the wrong type): is it an agentctl service?`,
        `point to the agent-vault service or a sandbox (\`agentctl serve\` prints its URL): ${changeUrlHint(target)}`,
        { ...reached, status: null },
      );
    }
    const status = body.status;
    const build = [
      typeof body.version === 'string' ? `version ${body.version}` : '',
      typeof body.chain_id === 'number' ? `chain ${body.chain_id}` : '',
    ].filter(Boolean);
    const what = `${kind}${build.length ? ` (${build.join(', ')})` : ''}`;
    const reason =
      typeof body.reason === 'string'
        ? body.reason
        : body.rpc_connected === false
          ? 'its chain RPC is not connected'
          : undefined;
    if (!HEALTHY.has(status.toLowerCase()) || body.rpc_connected === false) {
      return problem(
        target.name,
        `${where}: ${status}${reason ? ` (${reason})` : ''}, ${what}`,
        sandbox
          ? 'a sandbox recovers by itself once its chain answers; if it does not, see why in its log (`agentctl serve logs --state <dir>`), or restart it'
          : 'wait, then run `agentctl doctor` again; if it stays so, tell the service operator',
        { ...reached, status },
      );
    }
    return passed(target.name, `${where}: ${status}, ${what}`, { ...reached, status });
  } finally {
    transport.close();
  }
}
