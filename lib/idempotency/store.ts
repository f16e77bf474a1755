/**
 * Retry protection on `transactionReference` (docs/idempotency.md): the store
 * the proxy talks to, whatever keeps the keys (this process's memory or a
 * Redis shared by every replica).
 */

/** A backend answer kept for replay. `headers` is a flat raw list [name, value, name, value, ...] already free of hop-by-hop headers. */
export interface RecordedAnswer {
  readonly status: number
  readonly headers: readonly string[]
  readonly body: Buffer
}

export type Claim =
  /** The first request with the key: forward it. */
  | { readonly state: 'claimed'; readonly token: string }
  /** The first is still in flight: 409. */
  | { readonly state: 'inFlight' }
  /** Same fingerprint, answer recorded (or the unknown answer of a claim past its window): replay. */
  | { readonly state: 'recorded'; readonly answer: RecordedAnswer }
  /** Different fingerprint, answer recorded: 422. */
  | { readonly state: 'mismatch' }
  /** Answer recorded under a fingerprint `matches` cannot compare (a key the caller does not hold): neither 422 nor a replay. */
  | { readonly state: 'unknownKey' }

/** What `claim` would answer now, without claiming: `free` where it would claim the key. */
export type Peek = 'free' | 'inFlight' | 'recorded' | 'mismatch' | 'unknownKey'

/**
 * Whether a stored fingerprint of another form is the payment's: true, false, or undefined when it cannot
 * tell because the stored one was made under a key it does not hold (fingerprint.ts; docs/idempotency-reference.md, keyed
 * fingerprints).
 */
export type Matches = (stored: string) => boolean | undefined

/** Whether `stored` is the fingerprint of the payment that brings `fingerprint`: undefined when `matches` cannot tell. */
export function sameFingerprint(
  stored: string,
  fingerprint: string,
  matches: Matches | undefined,
): boolean | undefined {
  if (stored === fingerprint) return true
  return matches === undefined ? false : matches(stored)
}

/** What a peek at a recorded answer says, from `sameFingerprint`. */
export function recordedPeek(same: boolean | undefined): Peek {
  if (same === undefined) return 'unknownKey'
  return same ? 'recorded' : 'mismatch'
}

export interface IdempotencyStore {
  /**
   * Atomic. A claim past its in-flight window with neither a record nor a
   * release answers as recorded with `unknownAnswer`. Rejects (throws / rejected
   * promise) when the store cannot be reached; never hangs (bounded by a command timeout).
   * A new claim stores `fingerprint`; a stored one that differs is this payment's too when `matches`
   * says so (one made under an older key, or before keyed fingerprints: fingerprint.ts), and
   * `unknownKey` when `matches` cannot tell (`sameFingerprint`).
   */
  claim(key: string, fingerprint: string, matches?: Matches): Claim | Promise<Claim>
  /**
   * Only the claim's owner (its token) can record or release, while no real
   * answer is recorded, also once the claim turned unknown (a late answer
   * replaces the unknown one); a stale token is a no-op. Until its owner does
   * one or the other, the claim's holder is at work (its relay still reading
   * the answer): a store that evicts never evicts that claim, past its window
   * too (memory.ts, whose holders are all in its process).
   */
  record(key: string, token: string, answer: RecordedAnswer): void | Promise<void>
  release(key: string, token: string): void | Promise<void>
  /** Report mode's read-only look (docs/rollout.md): never claims, writes or refreshes a key. Without it, report mode does not say what retry protection would do. */
  peek?(key: string, fingerprint: string, matches?: Matches): Peek | Promise<Peek>
  close(): Promise<void>
}

export interface IdempotencyStoreOptions {
  /** How long a recorded answer is replayed, in ms. Default 86400000 (a day). */
  ttlMs: number
  /**
   * How long a claim holds the key without an answer, in ms: the backend
   * timeout plus a margin. Past it, the claim is an unknown outcome (`unknownAnswer`),
   * kept `ttlMs` more: a gateway that died mid-payment may have forwarded it.
   */
  inFlightMs: number
  /** Largest answer kept (body plus header bytes). Default 65536. */
  maxAnswerBytes?: number
  /** Recorded instead of an answer larger than `maxAnswerBytes`: a 500 saying the backend answered but its answer cannot be replayed. */
  oversizedAnswer: RecordedAnswer
  /** What a claim past its in-flight window answers: a 5xx in the error format saying the outcome is unknown. */
  unknownAnswer: RecordedAnswer
}
