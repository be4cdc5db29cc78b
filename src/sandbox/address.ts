/** `host:port`, with an IPv6 host in brackets as URLs need it. */
export function formatHostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}
