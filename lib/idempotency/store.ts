/**
 * Retry protection on `transactionReference` (docs/idempotency.md): the store
 * every surface talks to, whatever keeps the keys (this process's memory or a
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
  /** Same fingerprint, answer recorded: replay. */
  | { readonly state: 'recorded'; readonly answer: RecordedAnswer }
  /** Different fingerprint, answer recorded: 422. */
  | { readonly state: 'mismatch' }

export interface IdempotencyStore {
  /** Atomic. Rejects (throws / rejected promise) when the store cannot be reached; never hangs (bounded by a command timeout). */
  claim(key: string, fingerprint: string): Claim | Promise<Claim>
  /** Only the claim's owner (its token) can record or release; a stale token is a no-op. */
  record(key: string, token: string, answer: RecordedAnswer): void | Promise<void>
  release(key: string, token: string): void | Promise<void>
  close(): Promise<void>
}

export interface IdempotencyStoreOptions {
  /** How long a recorded answer is replayed, in ms. Default 86400000 (a day). */
  ttlMs: number
  /** How long a claim holds the key without an answer, in ms: the backend timeout plus a margin, so a crashed gateway frees the key. */
  inFlightMs: number
  /** Largest answer kept (body plus header bytes). Default 65536. */
  maxAnswerBytes?: number
  /** Recorded instead of an answer larger than `maxAnswerBytes`: the 422 `transactionReferenceIsAlreadyUsed` answer saying the payment was processed. */
  oversizedAnswer: RecordedAnswer
  /** What a claim answers as once its in-flight window ended with neither a record nor a release: a 5xx in the error format saying the outcome is unknown. */
  unknownAnswer: RecordedAnswer
}
