import { reject, type Rejection } from '../errors.js'

/** Who sent the request, once BasicAuth has been verified. */
export interface Principal {
  readonly username: string
  /** The merchant entities this user may act for (check 9). */
  readonly entities: ReadonlySet<string>
}

/**
 * Check 1. Answers synchronously when the credentials are already known
 * (cached or throttled) and asynchronously when a slow hash must be verified.
 * `client` is the client's address where the caller can trust it
 * (docs/credentials.md), for a throttle per address.
 */
export interface Authenticator {
  authenticate(
    authorization: string | undefined,
    client?: string,
  ): Principal | Rejection | Promise<Principal | Rejection>
}

/** RFC 7617: the challenge names the realm and that credentials are UTF-8. */
export const WWW_AUTHENTICATE = 'Basic realm="payments", charset="UTF-8"'

export const ACCESS_DENIED: Rejection = Object.freeze(
  reject('accessDenied', { headers: Object.freeze({ 'WWW-Authenticate': WWW_AUTHENTICATE }) }),
)

/** Check 9: the user may act for the request's `merchant.entity`. */
export function checkEntityAccess(principal: Principal, entity: string): Rejection | undefined {
  return principal.entities.has(entity) ? undefined : ACCESS_DENIED
}
