import { hash } from 'node:crypto'

/**
 * What makes two requests with one key "the same payment": a SHA-256 digest
 * of the validated document as forwarded, under its operation's name. A
 * digest, so no card number is kept (docs/idempotency.md, what is stored).
 * One-shot `hash`: half the cost of a streaming digest for a payment's size.
 */
export function fingerprint(operation: string, forwardedBytes: Uint8Array): string {
  return `${operation} ${hash('sha256', forwardedBytes, 'base64')}`
}
