/**
 * The idempotency key of a payment: its merchant entity and its
 * `transactionReference`. JSON of the pair, so no two pairs spell one key,
 * whatever characters either holds.
 */
export function idempotencyKey(entity: string, transactionReference: string): string {
  return JSON.stringify([entity, transactionReference])
}
