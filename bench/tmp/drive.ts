import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import {
  depositsUnderSubscriptions,
  healthUnderErrorFlood,
  rssUnderDocumentFlood,
} from '../graphql-hardening.ts';

const BIN = fileURLToPath(new URL('../../bin/agentctl.js', import.meta.url));
const ADMIN = 'bench-admin-token';
function startServe(args: string[]) {
  const child = spawn(
    process.execPath,
    [
      ...(process.env.PROF ? ['--cpu-prof', '--cpu-prof-dir=/tmp/prof'] : []),
      BIN,
      'serve',
      '--port',
      '0',
      ...args,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, AGENTCTL_ADMIN_TOKEN: ADMIN } },
  );
  return new Promise<{ url: string; child: typeof child }>((resolve) => {
    let out = '';
    child.stdout.on('data', (c) => {
      out += c;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m?.[1]) resolve({ url: m[1], child });
    });
  });
}
const stop = (child: any) =>
  new Promise<void>((r) => {
    child.once('exit', () => r());
    child.kill('SIGTERM');
  });
async function registerAgent(base: string) {
  const account = privateKeyToAccount(generatePrivateKey());
  const { nonce, message } = (await (
    await fetch(`${base}/api/v1/agent/auth/nonce?wallet=${account.address}`)
  ).json()) as any;
  const r = await fetch(`${base}/api/v1/agent/auth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      wallet_address: account.address,
      signature: await account.signMessage({ message }),
      nonce,
      agent_name: `Bench ${account.address.slice(2, 10)}`,
      operator_address: account.address,
    }),
  });
  const j = (await r.json()) as any;
  if (!j.api_key) console.error(r.status, j);
  return j.api_key as string;
}
const tools = { startServe, stop, registerAgent, adminToken: ADMIN, quick: true } as any;
process.on('exit', () => {});
const which = process.argv[2];
if (which === 'fan') console.log(JSON.stringify(await depositsUnderSubscriptions(tools)));
if (which === 'rss') console.log(JSON.stringify(await rssUnderDocumentFlood(tools)));
if (which === 'health') console.log(JSON.stringify(await healthUnderErrorFlood(tools)));
