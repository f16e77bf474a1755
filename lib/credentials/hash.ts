import { randomBytes, scrypt, timingSafeEqual, type BinaryLike, type ScryptOptions } from 'node:crypto'
import { promisify } from 'node:util'
import { SCRYPT_DEFAULTS } from '../defaults.js'
import { decodeBase64 } from './base64.js'

/**
 * Password hashes are `scrypt$N$r$p$<salt base64>$<hash base64>`: the cost
 * parameters travel with each hash, so they can be raised for new hashes
 * while the old ones still verify.
 */
const SCHEME = 'scrypt'
export const SALT_BYTES = 16
export const KEY_BYTES = 32
/** Bounds on what a credentials file may ask of us, so a typo cannot make one verification take minutes. */
const MAX_N = 2 ** 20
const MAX_R = 32
const MAX_P = 16
const MIN_BYTES = 16

export interface ScryptParams {
  readonly N: number
  readonly r: number
  readonly p: number
}

export interface ParsedHash extends ScryptParams {
  readonly salt: Buffer
  readonly hash: Buffer
}

/** Async: the hash runs on libuv's thread pool, never blocking the event loop. (promisify types the first overload.) */
const scryptAsync = promisify(scrypt) as (
  password: BinaryLike,
  salt: BinaryLike,
  keylen: number,
  options: ScryptOptions,
) => Promise<Buffer>

/**
 * The bytes of scrypt's large array for a cost, N blocks of 128 * r bytes
 * (RFC 7914, section 5): what the bound on hashing memory counts
 * (docs/credentials.md, the memory a hash takes).
 */
export function scryptMemory({ N, r }: ScryptParams): number {
  return 128 * N * r
}

function derive(
  password: string,
  salt: Buffer,
  keylen: number,
  params: ScryptParams,
  memoryMax: number,
): Promise<Buffer> {
  const { N, r, p } = params
  // Node refuses a cost whose memory exceeds maxmem, which also counts scrypt's working blocks (128 * r * (p + 2)
  // bytes in OpenSSL's EVP_PBE_scrypt): the bound counts the large array alone.
  const options = { N, r, p, maxmem: memoryMax + 128 * r * (p + 2) }
  return scryptAsync(password.normalize('NFC'), salt, keylen, options)
}

function formatHash({ N, r, p, salt, hash }: ParsedHash): string {
  return [SCHEME, N, r, p, salt.toString('base64'), hash.toString('base64')].join('$')
}

function parseCost(text: string | undefined, max: number): number | undefined {
  if (text === undefined || !/^[1-9][0-9]{0,7}$/.test(text)) return undefined
  const value = Number(text)
  return value <= max ? value : undefined
}

/** The parts of a hash string, or undefined when it is not one that `hashPassword` could have made. */
export function parseHash(text: string): ParsedHash | undefined {
  const parts = text.split('$')
  if (parts.length !== 6 || parts[0] !== SCHEME) return undefined
  const N = parseCost(parts[1], MAX_N)
  const r = parseCost(parts[2], MAX_R)
  const p = parseCost(parts[3], MAX_P)
  const salt = decodeBase64(parts[4] as string)
  const hash = decodeBase64(parts[5] as string)
  if (N === undefined || r === undefined || p === undefined || salt === undefined || hash === undefined)
    return undefined
  // scrypt's N must be a power of two above 1.
  if (N < 2 || (N & (N - 1)) !== 0 || salt.length < MIN_BYTES || hash.length < MIN_BYTES) return undefined
  return { N, r, p, salt, hash }
}

/** A salted scrypt hash of the password (NFC-normalized, as RFC 7613's OpaqueString profile asks). */
export async function hashPassword(password: string, params: ScryptParams = SCRYPT_DEFAULTS): Promise<string> {
  const salt = randomBytes(SALT_BYTES)
  const hash = await derive(password, salt, KEY_BYTES, params, scryptMemory(params))
  return formatHash({ ...params, salt, hash })
}

/** Whether the password matches the hash, compared in constant time. A malformed hash matches nothing. */
export async function verifyPassword(password: string, hash: string): Promise<boolean> {
  const parsed = parseHash(hash)
  if (parsed === undefined) return false
  return matches(password, parsed)
}

/**
 * Whether the password matches a parsed hash, compared in constant time.
 * Rejects when the hash's cost takes more than `memoryMax` bytes (`scryptMemory`).
 */
export async function matches(
  password: string,
  parsed: ParsedHash,
  memoryMax: number = scryptMemory(parsed),
): Promise<boolean> {
  const derived = await derive(password, parsed.salt, parsed.hash.length, parsed, memoryMax)
  return timingSafeEqual(derived, parsed.hash)
}
