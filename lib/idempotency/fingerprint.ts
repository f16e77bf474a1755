import { createHash } from 'node:crypto'

/**
 * What makes two requests with one key "the same payment": a SHA-256 digest
 * of the operation and the validated document as forwarded. A digest, so no
 * card number is kept (docs/idempotency.md, what is stored).
 */
export function fingerprint(operation: string, forwardedBytes: Uint8Array): string {
  return createHash('sha256').update(operation).update('\u0000').update(forwardedBytes).digest('base64')
}
