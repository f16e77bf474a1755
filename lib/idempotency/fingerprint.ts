import { createHmac, hash, randomBytes } from 'node:crypto'
import { CodedError } from '../coded-error.js'
import { FILE_LIMITS } from '../defaults.js'
import { readFailure } from '../file-error.js'
import { readLimitedFile } from '../read-file.js'
import type { Matches } from './store.js'

/** A key's least length: HMAC-SHA-256's own output size (RFC 2104 section 3: a key shorter than it weakens the MAC). */
export const MIN_FINGERPRINT_KEY_BYTES = 32

/** The current key and, during a rotation, the one before it (PCI DSS v4 3.6, 3.7). */
const MOST_KEYS = 2

/** The text a stored fingerprint starts with before its key id: no operation name holds a colon, so no unkeyed one does. */
const KEYED = 'hmac:'

/**
 * What makes two requests with one key "the same payment": an HMAC-SHA-256,
 * under a key the fleet shares, of the document, under its operation's name.
 * Keyed, because the document of a `card/plain` payment holds a card number
 * and a digest of it must be a keyed one (PCI DSS v4 3.5.1.1; docs/idempotency-reference.md,
 * what is stored). The value names its key (an id derived from the key), so
 * that a record made under the key before a rotation is still recognized.
 */
export interface Fingerprint {
  /** What a new claim stores: `hmac:KEYID OPERATION DIGEST`. */
  readonly value: string
  /**
   * Whether a stored fingerprint of another form is this payment's: one made under the older key, or an
   * unkeyed SHA-256 made before keyed fingerprints, still live for its TTL after an upgrade. Undefined for
   * one made under a key this gateway does not hold (during a rotation): it cannot tell, and a 422 would
   * tell the client of a charged payment to pay again (docs/idempotency-reference.md, keyed fingerprints).
   */
  readonly matches: Matches
}

/** What is fingerprinted: a document's bytes, or its text, hashed as UTF-8. */
export type Document = Uint8Array | string

export interface Fingerprinter {
  /**
   * The fingerprint of `bytes` under `operation`; `legacy` gives, only when a stored fingerprint is
   * unkeyed, the documents an older gateway may have fingerprinted for this payment.
   */
  of(operation: string, bytes: Document, legacy: () => readonly Document[]): Fingerprint
}

/** The fingerprint's form before keyed fingerprints: a SHA-256 digest, kept to compare the records made then. */
export function unkeyedFingerprint(operation: string, bytes: Document): string {
  return `${operation} ${hash('sha256', bytes, 'base64')}`
}

/** SHA-256's block, in bytes (RFC 6234): what HMAC pads its key to (RFC 2104 section 2). */
const BLOCK_BYTES = 64
/** SHA-256's digest, in bytes. */
const DIGEST_BYTES = 32
/** The most UTF-8 bytes one UTF-16 code unit becomes (RFC 3629: a BMP character or a lone surrogate; a pair, two units, four bytes). */
const MOST_UTF8_PER_UNIT = 3

/** The key padded to a block and XORed with `pad` (RFC 2104 section 2: 0x36 inside, 0x5c outside); a key longer than a block hashed first. */
function paddedKey(key: Buffer, pad: number): Buffer {
  const block = Buffer.alloc(BLOCK_BYTES)
  ;(key.length > BLOCK_BYTES ? hash('sha256', key, 'buffer') : key).copy(block)
  for (let i = 0; i < BLOCK_BYTES; i++) block[i] = (block[i] as number) ^ pad
  return block
}

/**
 * HMAC-SHA-256 under `key` (RFC 2104), in base64, by node's one-shot `hash` over the key's two padded
 * blocks, made once: the digest `createHmac` gives (test/idempotency/fingerprint.test.ts holds RFC 4231's
 * vectors and compares both), without the OpenSSL context `createHmac` sets up anew for every payment,
 * which cost more than the hashing itself. Each call writes into the same two buffers, used to its
 * end without yielding, and takes the inner digest as a latin1 (`binary`) string: a Buffer made by
 * `hash` costs more than hashing a payment (docs/performance-history.md).
 */
export function hmacSha256(key: Buffer): (document: Document) => string {
  /** The inner padded key, then the document: grown as a longer one comes. */
  let message = paddedKey(key, 0x36)
  const digest = Buffer.allocUnsafe(BLOCK_BYTES + DIGEST_BYTES)
  paddedKey(key, 0x5c).copy(digest)
  /** `message` with room for `bytes` after the inner padded key. */
  const roomFor = (bytes: number) => {
    if (message.length >= BLOCK_BYTES + bytes) return
    const grown = Buffer.allocUnsafe(BLOCK_BYTES + bytes)
    message.copy(grown, 0, 0, BLOCK_BYTES)
    message = grown
  }
  return (document) => {
    let end
    if (typeof document === 'string') {
      // Room for the longest UTF-8 a text of this length can be: written once, its byte length never asked first.
      roomFor(MOST_UTF8_PER_UNIT * document.length)
      end = BLOCK_BYTES + message.write(document, BLOCK_BYTES)
    } else {
      roomFor(document.length)
      message.set(document, BLOCK_BYTES)
      end = BLOCK_BYTES + document.length
    }
    digest.write(hash('sha256', message.subarray(0, end), 'binary'), BLOCK_BYTES, 'latin1')
    return hash('sha256', digest, 'base64')
  }
}

/** A key's id: the start of its HMAC of a fixed text, as a key check value is, so it says nothing of the key. */
function keyId(key: Buffer): string {
  return KEYED + createHmac('sha256', key).update('payments-gate fingerprint key id').digest('hex').slice(0, 8)
}

/** The keys as `createGateway` takes them, checked: one or two, each at least 32 bytes. Throws `EFINGERPRINTKEY`. */
export function checkFingerprintKeys(keys: Buffer | readonly Buffer[]): readonly Buffer[] {
  const all = Buffer.isBuffer(keys) ? [keys] : keys
  if (all.length === 0 || all.length > MOST_KEYS || all.some((key) => key.length < MIN_FINGERPRINT_KEY_BYTES))
    throw new CodedError(
      'EFINGERPRINTKEY',
      (name) =>
        `${name('idempotencyFingerprintKey')} must hold one key, or two during a rotation (the current one first), each at least ${MIN_FINGERPRINT_KEY_BYTES} bytes; make one with openssl rand -hex 32`,
    )
  return all
}

/**
 * The keys of `--idempotency-fingerprint-key FILE`: one key a line, the current one first and, during
 * a rotation, the older one on the second line; a line's bytes are its key (a trailing CR dropped,
 * blank lines skipped). Throws `EFINGERPRINTKEY` with one line that never shows a key.
 */
export async function readFingerprintKeys(file: string): Promise<readonly Buffer[]> {
  let text: Buffer
  try {
    text = await readLimitedFile(file, FILE_LIMITS.secret)
  } catch (error) {
    throw new CodedError(
      'EFINGERPRINTKEY',
      (name) =>
        `${name('idempotencyFingerprintKey')} ${file}: ${readFailure(error)}; give the file holding the key, one line of at least ${MIN_FINGERPRINT_KEY_BYTES} bytes`,
    )
  }
  // latin1 maps each byte to one character and back, so a key's bytes are kept whatever they are.
  const lines = text.toString('latin1').split('\n')
  return checkFingerprintKeys(
    lines.map((line) => Buffer.from(line.replace(/\r$/, ''), 'latin1')).filter((key) => key.length > 0),
  )
}

/** A key of this process alone, for a store no other process reads (the memory store). */
export function processFingerprintKeys(): readonly Buffer[] {
  return [randomBytes(MIN_FINGERPRINT_KEY_BYTES)]
}

/** Fingerprints under `keys[0]`, recognizing those of every key given and the unkeyed ones. */
export function createFingerprinter(keys: readonly Buffer[]): Fingerprinter {
  const macs = new Map(keys.map((key) => [keyId(key), hmacSha256(key)]))
  const currentId = keyId(keys[0] as Buffer)
  const current = macs.get(currentId) as (document: Document) => string
  return {
    of(operation, bytes, legacy) {
      // One flat string, which the memory store keeps as it is (memory.ts, Entry): a template literal makes a join of pieces.
      const value = [currentId, operation, current(bytes)].join(' ')
      return {
        value,
        matches(stored) {
          if (stored.startsWith(KEYED)) {
            const id = stored.slice(0, stored.indexOf(' '))
            const mac = macs.get(id)
            return mac === undefined ? undefined : stored === `${id} ${operation} ${mac(bytes)}`
          }
          return legacy().some((document) => stored === unkeyedFingerprint(operation, document))
        },
      }
    },
  }
}
