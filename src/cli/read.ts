import type { Read } from '../api/client.ts';
import type { Output } from './output.ts';

/**
 * The sequence every read command shares: with --json, the service's body exactly as it was
 * sent (unknown fields and all); otherwise the answer, checked against the contract, goes to
 * `render`.
 *
 *   await showRead(out, client.vaults, [], (body) => out.table(…));
 */
export async function showRead<A extends unknown[], T>(
  out: Output,
  read: Read<A, T>,
  args: A,
  render: (data: T) => void | Promise<void>,
): Promise<void> {
  if (out.json) return out.raw((await read.asReceived(...args)).text);
  await render((await read(...args)).data);
}
