import type { BackendErrorRules } from './backend-errors/rules.js'
import { WWW_AUTHENTICATE } from './checks/auth.js'
import { MAX_DEPTH } from './checks/body.js'
import { normalizeBasePath } from './checks/route.js'
import { ERROR_CONTENT_TYPE, errorBodySchema, isErrorName, reject, type ErrorName } from './errors.js'
import { DEFAULTS, mediaTypes } from './defaults.js'
import { REQUEST_EXAMPLES } from './schema/examples.js'
import { RecurringRequest, SaleRequest } from './schema/bodies.js'
import { OPERATION_PATHS, OPERATIONS, type Operation } from './schema/payment.js'

export interface OpenApiOptions {
  /** The `<vendor>` in the media types. Default `example`. */
  vendor?: string
  /** Prefix in front of `/payments/...`. Default empty. */
  basePath?: string
  /** The `--backend-errors` rules: the names they define are listed under their statuses. */
  backendErrors?: BackendErrorRules
  /** Largest request body read, in bytes (`--body-limit`). Default 65536. */
  bodyLimit?: number
}

type Json = Record<string, unknown>

const OPERATION_DOCS: Readonly<Record<Operation, { operationId: string; schema: string; summary: string }>> = {
  sale: { operationId: 'cardOnFileSale', schema: 'CardOnFileSale', summary: 'Card on file sale' },
  recurring: {
    operationId: 'migrateRecurring',
    schema: 'MigrateRecurringAuthorization',
    summary: 'Migrate recurring authorization',
  },
}

type Status = number | '4XX' | '5XX'

/**
 * Every answer the gateway itself gives on the two paths, by status, in the
 * order of the check table in docs/checks.md, with the names a backend's error
 * answer gets without a rule (docs/backend-faults.md; the backend's status is
 * kept, so `accessDenied` is also a 403, and any other 4xx or 5xx is a range).
 * `headerHasInvalidValue` is the one name with three statuses. The proxy
 * (`payments-gate serve`) also answers what node's HTTP parser refuses or what
 * arrives too slowly, below HTTP, then closes the connection: the 408, the 431
 * and `requestIsMalformed`.
 */
const ERROR_RESPONSES: readonly (readonly [status: Status, names: readonly ErrorName[], why: string])[] = [
  [
    400,
    [
      'headerIsMissing',
      'headerHasInvalidValue',
      'bodyIsEmpty',
      'bodyIsNotJson',
      'bodyDoesNotMatchSchema',
      'entityIsNotConfigured',
      'paymentInstrumentIsNotSupported',
      'currencyIsNotSupported',
      'merchantIsNotConfigured',
      'requestIsMalformed',
      'requestIsInvalid',
    ],
    'The request must be corrected: a header is missing, `Connection` names a header the gateway checks, or the body is empty, not JSON, does not match the schema, or asks for what the entity is not configured for; or (`requestIsMalformed`, then the connection is closed) the HTTP request itself could not be parsed; or (`requestIsInvalid`) the backend refused it.',
  ],
  [
    401,
    ['accessDenied'],
    'BasicAuth credentials are missing or wrong, or the user may not act for `merchant.entity`; or the backend refused the caller.',
  ],
  [403, ['accessDenied'], 'The backend refused the caller.'],
  [404, ['resourceIsNotFound'], 'The backend did not find what was asked for.'],
  [
    405,
    ['methodIsNotAllowed'],
    'Answered to any method but POST on this path, with `Allow: POST`; or the backend refused the method, its `Allow` kept.',
  ],
  [406, ['headerHasInvalidValue'], 'The Accept header does not admit the response media type.'],
  [
    408,
    ['requestTimedOut'],
    'The request head or body did not arrive in time; the connection is closed. Or the backend said so.',
  ],
  [
    409,
    ['paymentIsInProgress', 'requestIsInConflict'],
    "Retry protection (the proxy): a payment with the same merchant entity and transactionReference is still in flight. Retry after `Retry-After` seconds; a retry then gets its answer. Or (`requestIsInConflict`) the backend found the request in conflict with the payment's state.",
  ],
  [413, ['bodyIsTooLarge'], 'The body is larger than the configured limit, or than the backend takes.'],
  [
    415,
    ['headerHasInvalidValue'],
    'The Content-Type is not the request media type, or the body has a Content-Encoding.',
  ],
  [
    422,
    ['transactionReferenceIsAlreadyUsed', 'requestIsNotProcessable'],
    'Retry protection (the proxy): the transactionReference was already used for a different payment, or its payment was processed and its answer was too large to keep. A retry of the same payment instead gets the first answer again, marked `Idempotent-Replayed: true`. Or (`requestIsNotProcessable`) the backend could not process it.',
  ],
  [429, ['requestRateIsTooHigh'], 'The backend takes no more requests for now; its `Retry-After` is kept.'],
  [431, ['headersAreTooLarge'], 'The request headers are larger than the server accepts; the connection is closed.'],
  ['4XX', ['requestIsRefused'], 'The backend refused the request with another 4xx status, kept.'],
  [500, ['internalErrorOccurred'], 'The backend failed or took too long.'],
  [
    503,
    ['serviceUnavailable'],
    'The backend cannot be reached, the gateway is shutting down, or the retry-protection store cannot be reached; or the backend said so, its `Retry-After` kept.',
  ],
  ['5XX', ['internalErrorOccurred'], 'The backend failed with another 5xx status, kept.'],
]

/**
 * What lib/checks/body.ts refuses in any body besides the schema: a nesting deeper than MAX_DEPTH (the
 * document the first level, each object or array inside one a level more), a `__proto__` key anywhere,
 * and a `constructor` key holding an object with a `prototype` key. JSON Schema says a depth only with
 * a schema per level and a key anywhere only with a recursive schema, and the tools people feed the
 * document to choke on both (swagger-parser's dereferencing grows with every path through the levels,
 * openapi-typescript recurses without end): so the request schemas stay bounded and carry the limits
 * beside them, in their description (which tools show and openapi-typescript copies into its types)
 * and as extensions. The gateway enforces them either way.
 */
const LIMITS = `Objects and arrays nested at most ${MAX_DEPTH} levels deep, the document itself the first: a deeper body is answered 400 bodyDoesNotMatchSchema. No \`__proto__\` key, and no \`constructor\` object with a \`prototype\` key, at any depth: answered 400 with \`fieldIsNotAllowed\` at its path.`

/**
 * What lib/checks/spelling.ts refuses, which JSON Schema cannot say for every letter case: stated
 * on each request body, for a contract-testing tool and for people (docs/checks.md, choices).
 */
const ONE_SPELLING =
  'Members the schema does not name are forwarded as they came, except another spelling of a named member: a name equal to a named member after Unicode case folding (`Entity`, `ſcheme`), or a named member repeated, is refused as `fieldIsNotAllowed` at its path.'

/**
 * Where clients reach the gateway: a sidecar's address is its deployment's (its Service from the
 * cluster, localhost from its own pod), which a printed document cannot know. A templated server
 * whose defaults are `serve`'s own (plain HTTP on port 8080) is true beside the gateway, lets a tool
 * be pointed elsewhere by its variables, and keeps the paths, which carry `--base-path`, as they are.
 * The variables are explained in the server's description: the OpenAPI 3.1 JSON Schema that
 * swagger-parser validates with spells a variable's `description` as `descriptions`.
 */
const SERVERS = [
  {
    url: '{scheme}://{host}',
    description: `The gateway, where clients reach it: \`scheme\` is \`https\` when it has \`--tls-cert\`; \`host\` its host and port (\`--listen\`, port ${DEFAULTS.port} by default), localhost from its own pod, its Service's name from elsewhere. The paths include its \`--base-path\`.`,
    variables: {
      scheme: { enum: ['http', 'https'], default: 'http' },
      host: { default: `localhost:${DEFAULTS.port}` },
    },
  },
]

/** A TypeBox schema as plain JSON Schema: JSON drops TypeBox's symbol keys. */
function plain(schema: unknown): Json {
  return JSON.parse(JSON.stringify(schema)) as Json
}

/**
 * The payment instrument union is emitted as `oneOf` without the OpenAPI
 * `discriminator`: its third branch (any other instrument type) has no fixed
 * `type` value that a discriminator mapping could name, and validators that
 * honour discriminators (Ajv's `discriminator` option, used by
 * express-openapi-validator) require one. The branches are mutually exclusive
 * (the third's pattern excludes the two card types), so `oneOf` accepts
 * exactly what the gateway's `anyOf` accepts.
 */
function withoutDiscriminators(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withoutDiscriminators)
  if (node === null || typeof node !== 'object') return node
  const out: Json = {}
  const union = 'discriminator' in node
  for (const [key, value] of Object.entries(node)) {
    if (union && key === 'discriminator') continue
    out[union && key === 'anyOf' ? 'oneOf' : key] = withoutDiscriminators(value)
  }
  return out
}

/** An operation's body schema for the document: the compiled one, with the limits the checks add to it. */
function requestSchema(schema: unknown): Json {
  return {
    ...(withoutDiscriminators(plain(schema)) as Json),
    description: LIMITS,
    'x-max-depth': MAX_DEPTH,
    'x-prototype-keys-refused': true,
  }
}

function errorResponse(status: Status, names: readonly string[], why: string, given: BackendErrorRules['names']): Json {
  const examples: Json = {}
  for (const name of names) {
    const headerName =
      name === 'headerHasInvalidValue'
        ? status === 406
          ? 'Accept'
          : status === 400
            ? 'Connection'
            : 'Content-Type'
        : name === 'headerIsMissing'
          ? 'Content-Type'
          : undefined
    examples[name] = {
      value: isErrorName(name)
        ? reject(name, { headerName }).body
        : { errorName: name, message: given.get(name)?.message },
    }
  }
  const response: Json = {
    description: `${why} errorName: ${names.join(', ')}.`,
    content: {
      [ERROR_CONTENT_TYPE]: {
        schema: { allOf: [{ $ref: '#/components/schemas/ErrorBody' }, { properties: { errorName: { enum: names } } }] },
        examples,
      },
    },
  }
  if (status === 401) response.headers = { 'WWW-Authenticate': { schema: { type: 'string', const: WWW_AUTHENTICATE } } }
  if (status === 405) response.headers = { Allow: { schema: { type: 'string' } } }
  if (status === 409 || status === 429 || status === 503)
    response.headers = { 'Retry-After': { schema: { type: 'string' } } }
  return response
}

/** The table's rows with the names the rules give added under their statuses (a new row for a status the table lacks). */
function responsesWith(rules: BackendErrorRules | undefined): [Status, string[], string][] {
  const rows = ERROR_RESPONSES.map(([status, names, why]): [Status, string[], string] => [status, [...names], why])
  for (const [name, { statuses }] of rules?.names ?? []) {
    for (const key of statuses) {
      const status: Status = key.endsWith('XX') ? (key as '4XX' | '5XX') : Number(key)
      let row = rows.find(([at]) => at === status)
      if (row === undefined) {
        row = [status, [], 'Named by the `--backend-errors` rules.']
        rows.push(row)
      }
      if (!row[1].includes(name)) row[1].push(name)
    }
  }
  return rows
}

/**
 * The OpenAPI 3.1 document of both operations, built from the same TypeBox
 * schemas and error table the gateway runs. The success answer is the
 * backend's (payments-v6 does not show its status or body), so it is left
 * open as any 2XX with the v6 HAL media type.
 */
export function buildOpenApi(options: OpenApiOptions = {}): Json {
  const types = mediaTypes(options.vendor ?? DEFAULTS.vendor)
  const base = normalizeBasePath(options.basePath ?? '')
  const bodyLimit = options.bodyLimit ?? DEFAULTS.bodyLimit
  const responses: Json = {
    '2XX': {
      description: "The backend's answer, passed back unchanged; payments-v6 does not show its status or body.",
      content: { [types.response]: { schema: {} } },
    },
  }
  const given = options.backendErrors?.names ?? new Map()
  for (const [status, names, why] of responsesWith(options.backendErrors))
    responses[String(status)] = errorResponse(status, names, why, given)
  const paths: Json = {}
  for (const operation of OPERATIONS) {
    const doc = OPERATION_DOCS[operation]
    paths[base + OPERATION_PATHS[operation]] = {
      post: {
        operationId: doc.operationId,
        summary: doc.summary,
        security: [{ BasicAuth: [] }],
        requestBody: {
          // OpenAPI has no keyword for a body's size: the description says it, and the extension gives it to tools.
          description: `At most ${bodyLimit} bytes (the gateway's \`--body-limit\`): a larger body is answered 413 bodyIsTooLarge. ${LIMITS} ${ONE_SPELLING}`,
          'x-max-body-bytes': bodyLimit,
          required: true,
          content: {
            [types.request]: {
              schema: { $ref: `#/components/schemas/${doc.schema}` },
              example: REQUEST_EXAMPLES[operation],
            },
          },
        },
        responses,
      },
    }
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Stored-card payments v6 (through payments-gate)',
      version: '6',
      description: `The two stored-card operations as payments-gate checks them. Every error the gateway answers is ${ERROR_CONTENT_TYPE} in the ErrorBody shape.`,
    },
    servers: SERVERS,
    paths,
    components: {
      securitySchemes: { BasicAuth: { type: 'http', scheme: 'basic' } },
      schemas: {
        [OPERATION_DOCS.sale.schema]: requestSchema(SaleRequest),
        [OPERATION_DOCS.recurring.schema]: requestSchema(RecurringRequest),
        ErrorBody: plain(errorBodySchema),
      },
    },
  }
}
