/** The sandbox `agentctl serve` listens on by default. */
export const DEFAULT_BASE_URL = 'http://127.0.0.1:8787';
export const DEFAULT_PROFILE = 'default';

/** The settings a profile holds; no imports, so help and completion can name them cheaply. */
export const PROFILE_KEYS = [
  'base_url',
  'data_url',
  'wallet_address',
  'keystore',
  'api_key',
] as const;
export type ProfileKey = (typeof PROFILE_KEYS)[number];
