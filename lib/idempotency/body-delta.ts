/**
 * Answer bodies kept as the difference from a recent one (docs/idempotency-reference.md,
 * the memory store). One backend's answers share most of their bytes (field
 * names, links, the echoed document) and differ in a few values; kept whole,
 * a day of them does not fit the memory store. Each body is written as copies
 * of runs of the current reference body and literal bytes between them, an
 * LZ77 whose window is that reference, in a few passes of plain array code.
 *
 * The encoding is a latin1 string (one character a byte): four bytes of the
 * body's length, then tokens: a byte 1..127 followed by that many literal
 * bytes, or 0x80 followed by the copy's offset and length in the reference
 * (two bytes each, little-endian).
 */

/** Runs shorter than this are cheaper as literals than as a five-byte copy. */
const MIN_COPY = 6
const HASH_BITS = 11
const COPY = 0x80
const MAX_LITERALS = 0x7f
/** Offsets and lengths are two bytes: a reference is at most this long. */
export const MAX_REFERENCE = 0xffff

/**
 * A body others are written against: its own copy of the bytes, and while it is the current one, where each
 * four-byte sequence that can start a copy last occurs in it.
 */
export class Reference {
  readonly bytes: Buffer
  /** How many kept entries are written against it. */
  users = 0
  #table: Int32Array | undefined = new Int32Array(1 << HASH_BITS).fill(-1)

  constructor(body: Uint8Array) {
    // Memory of its own: a slice of node's shared pool would keep the whole pool slab alive.
    this.bytes = Buffer.allocUnsafeSlow(Math.min(body.length, MAX_REFERENCE))
    this.bytes.set(body.subarray(0, this.bytes.length))
    // Only where a copy can start: a place nearer the end would hide an earlier one under its slot.
    for (let i = 0; i + MIN_COPY <= this.bytes.length; i++) (this.#table as Int32Array)[slot(word(this.bytes, i))] = i
  }

  /** Where the four bytes of `body` at `at` last occur here, if they do (never, once retired). */
  find(body: Uint8Array, at: number): number {
    const four = word(body, at)
    const p = this.#table === undefined ? -1 : (this.#table[slot(four)] as number)
    return p >= 0 && word(this.bytes, p) === four ? p : -1
  }

  /** No longer written against: its index goes, its bytes stay for the entries that use them. */
  retire(): void {
    this.#table = undefined
  }
}

/** The four bytes at `at`, as one integer. */
function word(bytes: Uint8Array, at: number): number {
  return (
    (bytes[at] as number) |
    ((bytes[at + 1] as number) << 8) |
    ((bytes[at + 2] as number) << 16) |
    ((bytes[at + 3] as number) << 24)
  )
}

/** The index's slot of a word: a Fibonacci hash, its top `HASH_BITS` bits. */
const slot = (four: number) => Math.imul(four, 0x9e3779b1) >>> (32 - HASH_BITS)

/** Room for the worst case: every byte a literal, one length byte per 127 of them, and the length in front. */
let scratch = Buffer.allocUnsafeSlow(4096)

/** `body` written against `reference`, as a latin1 string. */
export function encode(body: Uint8Array, reference: Reference): string {
  const n = body.length
  const worst = 4 + n + Math.ceil(n / MAX_LITERALS)
  if (scratch.length < worst) scratch = Buffer.allocUnsafeSlow(worst)
  const out = scratch
  const r = reference.bytes
  out.writeUInt32LE(n, 0)
  let o = 4
  let literal = 0
  let i = 0
  while (i + MIN_COPY <= n) {
    const p = reference.find(body, i)
    if (p < 0) {
      i++
      continue
    }
    let length = 4
    // Past the reference's end it reads undefined, which no byte of the body equals.
    while (i + length < n && r[p + length] === body[i + length]) length++
    if (length < MIN_COPY) {
      i++
      continue
    }
    o = literals(out, o, body, literal, i)
    out[o] = COPY
    out.writeUInt16LE(p, o + 1)
    out.writeUInt16LE(length, o + 3)
    o += 5
    i += length
    literal = i
  }
  o = literals(out, o, body, literal, n)
  return out.toString('latin1', 0, o)
}

/** The bytes of `body` from `from` to `to` as literal tokens at `o` of `out`; returns where they end. */
function literals(out: Buffer, o: number, body: Uint8Array, from: number, to: number): number {
  for (let at = from; at < to;) {
    const count = Math.min(to - at, MAX_LITERALS)
    out[o++] = count
    out.set(body.subarray(at, at + count), o)
    o += count
    at += count
  }
  return o
}

/** The body `encoded` was written from, against the same reference. */
export function decode(encoded: string, reference: Reference): Buffer {
  const input = Buffer.from(encoded, 'latin1')
  const body = Buffer.allocUnsafe(input.readUInt32LE(0))
  let o = 0
  for (let i = 4; i < input.length;) {
    const token = input[i] as number
    if (token === COPY) {
      const at = input.readUInt16LE(i + 1)
      const length = input.readUInt16LE(i + 3)
      reference.bytes.copy(body, o, at, at + length)
      o += length
      i += 5
    } else {
      input.copy(body, o, i + 1, i + 1 + token)
      o += token
      i += 1 + token
    }
  }
  return body
}
