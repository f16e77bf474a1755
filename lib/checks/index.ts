import { DEFAULTS, mediaTypes, type MediaTypes } from '../defaults.js'
import { reject, schemaRejection, type Rejection } from '../errors.js'
import type { Mode, Policy, PolicySource } from '../policy/policy.js'
import type { RateLimiter } from '../rate-limit/limiter.js'
import { compileSchema, type CompiledSchema } from '../schema/compile.js'
import { REQUEST_NAMES } from '../schema/names.js'
import { REQUEST_SCHEMAS } from '../schema/bodies.js'
import { OPERATIONS, type Operation, type PaymentRequest } from '../schema/payment.js'
import { ACCESS_DENIED, checkEntityAccess, type Authenticator, type Principal } from './auth.js'
import { checkSize, parseBody } from './body.js'
import {
  buildAcceptCheck,
  buildConnectionCheck,
  buildContentEncodingCheck,
  buildTransferCodingCheck,
  buildContentTypeCheck,
  buildJsonTypeCheck,
  type Headers,
} from './headers.js'
import { applyPolicy, rewritesOf, type Rewrite } from './policy.js'
import { buildRouter, normalizeBasePath, routeFor, type RequestTarget } from './route.js'

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
  /** The mode of a request whose entity has no mode of its own (docs/rollout.md). Default `enforce`. */
  mode?: Mode
  /** The rate limit the middleware surfaces apply after check 13 (docs/policies.md, rate limit). Default: none. */
  rateLimiter?: RateLimiter
}

/** A request that passed every check: the document to forward, already rewritten, and who sent it. */
export interface Passed {
  readonly ok: true
  readonly operation: Operation
  readonly entity: string
  readonly document: PaymentRequest
  /** The authenticated user; undefined only where no credentials were checked (`payments-gate validate`). */
  readonly principal: Principal | undefined
  /** Its entity's policy, as it passed it. */
  readonly policy: Policy
}

/**
 * A request that passed checks 1 to 9 in enforce mode, before its entity's policy (checks 10 to 13) and
 * rewrites: retry protection looks its key up here, so that a retry is replayed whatever the policy
 * says now (docs/idempotency.md). `checkPolicy` finishes it.
 */
export interface Entitled {
  readonly ok: 'entitled'
  readonly operation: Operation
  readonly entity: string
  /** As parsed, not yet rewritten: `checkPolicy` rewrites this very document. */
  readonly document: PaymentRequest
  readonly principal: Principal | undefined
  readonly policy: Policy
}

/**
 * Report mode (docs/rollout.md): a request to pass on as it came, and what enforce mode would have
 * done with it. BasicAuth, check 9, and what changes how the body is read still refuse in report mode.
 */
export interface Reported {
  readonly ok: 'report'
  readonly operation: Operation
  /** `merchant.entity`: report mode passes on only a body it read that far (docs/rollout.md). */
  readonly entity: string
  /** The authenticated user; undefined only where no credentials were checked. */
  readonly principal: Principal | undefined
  /** The body's bytes as they came. */
  readonly body: Uint8Array
  /** The body as parsed, never rewritten. */
  readonly received: unknown
  /** The refusal enforce mode would have answered; undefined when every check passed. */
  readonly wouldRefuse: Rejection | undefined
  /** The rewrites enforce mode would have made before forwarding. */
  readonly wouldRewrite: readonly Rewrite[]
  /** The document enforce mode would have forwarded, rewritten; undefined when it would have refused. */
  readonly document: PaymentRequest | undefined
  /** Its entity's policy, when every check passed (`document` is there). */
  readonly policy: Policy | undefined
}

/** The outcome of the checks: passed, the refusal to answer, or in report mode what enforce would have done. */
export type Verdict = Passed | Reported | Rejection

/** The rewrites of a request enforce mode would refuse: none. */
export const NO_REWRITE: readonly Rewrite[] = Object.freeze([])

/** `merchant.entity` of a document that failed its schema, when it is there as a string. */
function entityOf(document: unknown): string | undefined {
  const merchant = (document as { merchant?: unknown } | null)?.merchant
  const entity = (merchant as { entity?: unknown } | null | undefined)?.entity
  return typeof entity === 'string' ? entity : undefined
}

/**
 * Every check of docs/checks.md, built once from options, pure: the proxy, the
 * middleware adapters and the `validate` command all run these, in this order.
 */
export interface Checks {
  readonly mediaTypes: MediaTypes
  readonly bodyLimit: number
  /** The mode of a request whose entity has none of its own, unless a caller passes another. */
  readonly mode: Mode
  /** The rate limit the middleware surfaces apply (http/screen.ts); the proxy counts in its own store. */
  readonly rateLimiter: RateLimiter | undefined
  /**
   * The one reading of a request target that routing and forwarding share: its operation (whatever the
   * method) and the origin form to forward, or the 400 for a target that is not one (docs/checks.md,
   * routes). `mounted` reads it as a middleware must, an operation's path under any mount point.
   */
  targetOf(url: string | undefined, mounted?: boolean): RequestTarget | Rejection
  /** The operation whose path `url` names (whatever the method), or undefined for a path that is not ours or a target refused. */
  operationOf(url: string | undefined): Operation | undefined
  /** The operation a request addresses, a 405, the 400 for a target that is not one, or undefined for a path that is not ours. */
  route(method: string | undefined, url: string | undefined): Operation | Rejection | undefined
  /** Check 1; `client` as `Authenticator` takes it. */
  authenticate(
    authorization: string | undefined,
    client?: string,
  ): Principal | Rejection | Promise<Principal | Rejection>
  /**
   * Checks 2 to 4, and 5 on a declared `Content-Length`: everything decided before the body is read,
   * with the headers the checks read not named by `Connection`, and the body not content-coded.
   */
  checkHead(headers: Headers): Rejection | undefined
  /**
   * Whether report mode may hold the refusal `checkHead` found on these headers until the body names
   * its entity: when it is Accept's, or the Content-Type's for a JSON type in UTF-8 (`application/json`,
   * `+json`), which a backend reads as the checks read the body. Every other refusal of the head says
   * the body would be read otherwise than the checks read it, or read past the limit (docs/rollout.md).
   */
  holdable(headers: Headers): boolean
  /**
   * Checks 5 to 13 on the body's bytes, then the rewrites. Without a principal, check 9 is skipped.
   * `mode` is the request's unless its entity's policy names one; `earlier` is a refusal already
   * found on its head, which report mode holds until the entity, and so the mode, is known.
   */
  checkBody(operation: Operation, body: Uint8Array, principal?: Principal, mode?: Mode, earlier?: Rejection): Verdict
  /** `checkBody` up to check 9: an enforce-mode request that passed it is `Entitled`, for `checkPolicy` to finish. */
  checkEntitled(
    operation: Operation,
    body: Uint8Array,
    principal?: Principal,
    mode?: Mode,
    earlier?: Rejection,
  ): Entitled | Reported | Rejection
  /** Checks 10 to 13 and the rewrites, on the document itself: the rest of `checkBody`. */
  checkPolicy(entitled: Entitled): Passed | Rejection
  /** Checks 2 to 13 in one call, for callers that hold the whole request. */
  check(operation: Operation, headers: Headers, body: Uint8Array, principal?: Principal, mode?: Mode): Verdict
}

export function buildChecks(options: ChecksOptions): Checks {
  const types = mediaTypes(options.vendor ?? DEFAULTS.vendor)
  const bodyLimit = options.bodyLimit ?? DEFAULTS.bodyLimit
  const { policies, authenticator } = options
  const defaultMode = options.mode ?? DEFAULTS.mode
  const targetOf = buildRouter(normalizeBasePath(options.basePath ?? DEFAULTS.basePath))
  const connection = buildConnectionCheck()
  const contentType = buildContentTypeCheck(types)
  const encoding = buildContentEncodingCheck()
  const transfer = buildTransferCodingCheck()
  const json = buildJsonTypeCheck()
  const accept = buildAcceptCheck(types)
  const schemas = new Map<Operation, CompiledSchema<PaymentRequest>>()
  for (const operation of OPERATIONS) schemas.set(operation, compileSchema<PaymentRequest>(REQUEST_SCHEMAS[operation]))

  function declaredSize(headers: Headers): Rejection | undefined {
    const declared = headers['content-length']
    return declared === undefined ? undefined : checkSize(Number(declared), bodyLimit)
  }

  function checkHead(headers: Headers): Rejection | undefined {
    return (
      connection(headers) ??
      contentType(headers) ??
      encoding(headers) ??
      transfer(headers) ??
      accept(headers) ??
      declaredSize(headers)
    )
  }

  function holdable(headers: Headers): boolean {
    return (
      connection(headers) === undefined &&
      (contentType(headers) === undefined || json(headers)) &&
      encoding(headers) === undefined &&
      transfer(headers) === undefined &&
      declaredSize(headers) === undefined
    )
  }

  function checkEntitled(
    operation: Operation,
    body: Uint8Array,
    principal?: Principal,
    mode = defaultMode,
    earlier?: Rejection,
  ): Entitled | Reported | Rejection {
    const parsed = parseBody(body, bodyLimit, REQUEST_NAMES[operation])
    // A body that names no entity cannot be let through in report mode either (docs/rollout.md).
    if (!parsed.ok) return earlier ?? parsed
    const document = parsed.value
    const schema = schemas.get(operation) as CompiledSchema<PaymentRequest>
    if (!schema.check(document))
      return refusedInMode(
        operation,
        principal,
        body,
        document,
        earlier ?? schemaRejection(schema.errors(document)),
        mode,
      )
    const entity = document.merchant.entity
    if (principal !== undefined) {
      const denied = checkEntityAccess(principal, entity)
      if (denied !== undefined) return denied
    }
    const policy = policies.get(entity)
    if (policy === undefined)
      return refusedInMode(operation, principal, body, document, earlier ?? reject('entityIsNotConfigured'), mode)
    if ((policy.mode ?? mode) === 'enforce')
      return earlier ?? { ok: 'entitled', operation, entity, document, principal, policy }
    // The bytes that came are what report mode forwards: the policy rewrites a copy, to tell what would change.
    const forwarded = structuredClone(document)
    const refused = earlier ?? applyPolicy(forwarded, policy)
    if (refused !== undefined) return reported(operation, entity, principal, body, document, refused)
    const wouldRewrite = rewritesOf(document, forwarded, body)
    return {
      ok: 'report',
      operation,
      entity,
      principal,
      body,
      received: document,
      wouldRefuse: undefined,
      wouldRewrite,
      document: forwarded,
      policy,
    }
  }

  function checkPolicy({ operation, entity, document, principal, policy }: Entitled): Passed | Rejection {
    return applyPolicy(document, policy) ?? { ok: true, operation, entity, document, principal, policy }
  }

  function checkBody(
    operation: Operation,
    body: Uint8Array,
    principal?: Principal,
    mode?: Mode,
    earlier?: Rejection,
  ): Verdict {
    const verdict = checkEntitled(operation, body, principal, mode, earlier)
    return verdict.ok === 'entitled' ? checkPolicy(verdict) : verdict
  }

  /**
   * A refusal found before the entity's policy was read: its mode is the entity's, when the document
   * names an entity (docs/rollout.md), and report mode still refuses a user check 9 would refuse. A
   * document that names no entity gets enforce's answer: report mode passes on only what it can
   * attribute to an entity the user may act for.
   */
  function refusedInMode(
    operation: Operation,
    principal: Principal | undefined,
    body: Uint8Array,
    document: unknown,
    refusal: Rejection,
    mode: Mode,
  ): Rejection | Reported {
    const entity = entityOf(document)
    if (entity === undefined || (policies.get(entity)?.mode ?? mode) === 'enforce') return refusal
    const denied = principal === undefined ? undefined : checkEntityAccess(principal, entity)
    return denied ?? reported(operation, entity, principal, body, document, refusal)
  }

  return {
    mediaTypes: types,
    bodyLimit,
    targetOf,
    operationOf: (url) => {
      const target = targetOf(url)
      return target.ok ? target.operation : undefined
    },
    route: (method, url) => {
      const target = targetOf(url)
      return target.ok ? routeFor(method, target.operation) : target
    },
    authenticate: (authorization, client) =>
      authenticator === undefined ? ACCESS_DENIED : authenticator.authenticate(authorization, client),
    checkHead,
    holdable,
    mode: defaultMode,
    rateLimiter: options.rateLimiter,
    checkBody,
    checkEntitled,
    checkPolicy,
    check(operation, headers, body, principal, mode = defaultMode) {
      const head = checkHead(headers)
      return head !== undefined && (mode === 'enforce' || !holdable(headers))
        ? head
        : checkBody(operation, body, principal, mode, head)
    },
  }
}

/** Report mode's verdict on a request enforce mode would have refused. */
function reported(
  operation: Operation,
  entity: string,
  principal: Principal | undefined,
  body: Uint8Array,
  received: unknown,
  refusal: Rejection,
): Reported {
  return {
    ok: 'report',
    operation,
    entity,
    principal,
    body,
    received,
    wouldRefuse: refusal,
    wouldRewrite: NO_REWRITE,
    document: undefined,
    policy: undefined,
  }
}
