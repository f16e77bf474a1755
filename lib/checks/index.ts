import { DEFAULTS, mediaTypes, type MediaTypes } from '../defaults.js'
import { reject, schemaRejection, type Rejection } from '../errors.js'
import type { PolicySource } from '../policy/policy.js'
import { compileSchema, type CompiledSchema } from '../schema/compile.js'
import { OPERATIONS, REQUEST_SCHEMAS, type Operation, type PaymentRequest } from '../schema/payment.js'
import { ACCESS_DENIED, checkEntityAccess, type Authenticator, type Principal } from './auth.js'
import { checkSize, parseBody } from './body.js'
import { buildAcceptCheck, buildContentTypeCheck, type Headers } from './headers.js'
import { applyPolicy } from './policy.js'
import { buildRouter, normalizeBasePath, routeFor } from './route.js'

/** What the checks are built from: the parts of the gate's options they read. */
export interface ChecksOptions {
  /** The current policy of each merchant entity (docs/checks.md, checks 10 to 13). */
  policies: PolicySource
  /** Check 1. Without one, `authenticate` refuses everybody. */
  authenticator?: Authenticator
  /** The `<vendor>` in the media types. Default `example`. */
  vendor?: string
  /** Prefix in front of `/payments/...`. Default empty. */
  basePath?: string
  /** Largest body read, in bytes. Default 65536. */
  bodyLimit?: number
}

/** A request that passed every check: the document to forward, already rewritten, and who sent it. */
export interface Passed {
  readonly ok: true
  readonly operation: Operation
  readonly entity: string
  readonly document: PaymentRequest
  /** The authenticated user; undefined only where no credentials were checked (`payments-gate validate`). */
  readonly principal: Principal | undefined
}

/** The outcome of the checks: passed, or the refusal to answer. */
export type Verdict = Passed | Rejection

/**
 * Every check of docs/checks.md, built once from options, pure: the proxy, the
 * middleware adapters and the `validate` command all run these, in this order.
 */
export interface Checks {
  readonly mediaTypes: MediaTypes
  readonly bodyLimit: number
  /** The operation whose path `url` names (whatever the method), or undefined for a path that is not ours. */
  operationOf(url: string | undefined): Operation | undefined
  /** The operation a request addresses, a 405, or undefined for a path that is not ours. */
  route(method: string | undefined, url: string | undefined): Operation | Rejection | undefined
  /** Check 1. */
  authenticate(authorization: string | undefined): Principal | Rejection | Promise<Principal | Rejection>
  /** Checks 2 to 4, and 5 on a declared `Content-Length`: everything decided before the body is read. */
  checkHead(headers: Headers): Rejection | undefined
  /** Checks 5 to 13 on the body's bytes, then the rewrites. Without a principal, check 9 is skipped. */
  checkBody(operation: Operation, body: Uint8Array, principal?: Principal): Verdict
  /** Checks 2 to 13 in one call, for callers that hold the whole request. */
  check(operation: Operation, headers: Headers, body: Uint8Array, principal?: Principal): Verdict
}

export function buildChecks(options: ChecksOptions): Checks {
  const types = mediaTypes(options.vendor ?? DEFAULTS.vendor)
  const bodyLimit = options.bodyLimit ?? DEFAULTS.bodyLimit
  const { policies, authenticator } = options
  const operationOf = buildRouter(normalizeBasePath(options.basePath ?? DEFAULTS.basePath))
  const contentType = buildContentTypeCheck(types)
  const accept = buildAcceptCheck(types)
  const schemas = new Map<Operation, CompiledSchema<PaymentRequest>>()
  for (const operation of OPERATIONS) schemas.set(operation, compileSchema<PaymentRequest>(REQUEST_SCHEMAS[operation]))

  function checkHead(headers: Headers): Rejection | undefined {
    const refused = contentType(headers) ?? accept(headers)
    if (refused !== undefined) return refused
    const declared = headers['content-length']
    return declared === undefined ? undefined : checkSize(Number(declared), bodyLimit)
  }

  function checkBody(operation: Operation, body: Uint8Array, principal?: Principal): Verdict {
    const parsed = parseBody(body, bodyLimit)
    if (!parsed.ok) return parsed
    const document = parsed.value
    const schema = schemas.get(operation) as CompiledSchema<PaymentRequest>
    if (!schema.check(document)) return schemaRejection(schema.errors(document))
    const entity = document.merchant.entity
    if (principal !== undefined) {
      const denied = checkEntityAccess(principal, entity)
      if (denied !== undefined) return denied
    }
    const policy = policies.get(entity)
    if (policy === undefined) return reject('entityIsNotConfigured')
    return applyPolicy(document, policy) ?? { ok: true, operation, entity, document, principal }
  }

  return {
    mediaTypes: types,
    bodyLimit,
    operationOf,
    route: (method, url) => routeFor(method, operationOf(url)),
    authenticate: (authorization) => (authenticator === undefined ? ACCESS_DENIED : authenticator.authenticate(authorization)),
    checkHead,
    checkBody,
    check: (operation, headers, body, principal) => checkHead(headers) ?? checkBody(operation, body, principal),
  }
}
