import { Validator } from '@seriousme/openapi-schema-validator'
import t from 'tap'
import { Ajv2020 } from 'ajv/dist/2020.js'
import { MAX_DEPTH } from '../lib/checks/body.js'
import { buildChecks } from '../lib/checks/index.js'
import { luhnValid } from '../lib/luhn.js'
import { DEFAULTS } from '../lib/defaults.js'
import { buildOpenApi } from '../lib/openapi.js'
import { ERRORS, reject } from '../lib/errors.js'
import { loadPolicyDir } from '../lib/policy/load.js'
import { REQUEST_SCHEMAS } from '../lib/schema/bodies.js'
import { OPERATION_PATHS, OPERATIONS } from '../lib/schema/payment.js'
import { POLICIES_DIR, REQUEST_TYPE, saleBody, tokenRecurringBody } from './helpers/fixtures.js'

type Json = Record<string, any>

/**
 * Ajv validators of the document's request schemas, resolved as a tool would:
 * the components are one schema resource, so that their `$ref`s resolve.
 */
function requestValidators(document: Json, mediaType: string = REQUEST_TYPE) {
  const ajv = new Ajv2020({ allErrors: true, strict: false })
  ajv.addFormat('luhn', luhnValid)
  const id = 'https://payments-gate.invalid/openapi.json'
  ajv.addSchema({ $id: id, components: document.components })
  const validator = (path: string) => {
    const ref: string = document.paths[path].post.requestBody.content[mediaType].schema.$ref
    const validate = ajv.getSchema(`${id}${ref}`)
    if (validate === undefined) throw new Error(`${ref} does not resolve`)
    return (body: unknown) => validate(body) as boolean
  }
  return { sale: validator(OPERATION_PATHS.sale), recurring: validator(OPERATION_PATHS.recurring) }
}

let defaultValidators: ReturnType<typeof requestValidators> | undefined
/** `requestValidators` of the default document, compiled once for the tests that read it: Ajv's compile is the dear part. */
const validatorsOfDefault = () => (defaultValidators ??= requestValidators(buildOpenApi() as Json))

/** One OpenAPI validator for the file's tests, which run one at a time: it compiles the 3.1 schema once, on first use. */
const openApiValidator = new Validator()

t.test('the document is valid OpenAPI 3.1', async (t) => {
  const validator = openApiValidator
  const result = await validator.validate(buildOpenApi())
  t.same(result.errors, undefined)
  t.equal(result.valid, true)
  t.equal(validator.version, '3.1')
  const withOptions = await validator.validate(buildOpenApi({ vendor: 'acme', basePath: 'api/' }))
  t.equal(withOptions.valid, true)
})

t.test('vendor and base path shape the paths and media types', async (t) => {
  const document = buildOpenApi({ vendor: 'acme', basePath: 'api/' }) as Json
  t.same(Object.keys(document.paths), [
    '/api/payments/sales/migrateCardOnFile',
    '/api/payments/authorizations/migrateRecurring',
  ])
  const sale = document.paths['/api/payments/sales/migrateCardOnFile'].post
  t.same(Object.keys(sale.requestBody.content), ['application/vnd.acme.payments-v6+json'])
  t.match(sale.requestBody.description, /another spelling of a named member.*fieldIsNotAllowed/, 'one spelling')
  t.same(Object.keys(sale.responses['2XX'].content), ['application/vnd.acme.payments-v6.hal+json'])
  t.same(sale.security, [{ BasicAuth: [] }])
  t.same(document.components.securitySchemes.BasicAuth, { type: 'http', scheme: 'basic' })
})

t.test("one templated server, whose defaults are serve's own: plain HTTP on its default port", async (t) => {
  const [server, ...others] = (buildOpenApi() as Json).servers
  t.same(others, [])
  t.equal(server.url, '{scheme}://{host}')
  t.same(server.variables, {
    scheme: { enum: ['http', 'https'], default: 'http' },
    host: { default: `localhost:${DEFAULTS.port}` },
  })
  t.match(server.description, '`https` when it has `--tls-cert`')
})

t.test('error responses name their errorNames and match the error table', async (t) => {
  const document = buildOpenApi() as Json
  for (const path of Object.keys(document.paths)) {
    const { responses } = document.paths[path].post
    t.same(Object.keys(responses).sort(), [
      '2XX',
      '400',
      '401',
      '403',
      '404',
      '405',
      '406',
      '408',
      '409',
      '413',
      '415',
      '422',
      '429',
      '431',
      '4XX',
      '500',
      '503',
      '5XX',
    ])
    for (const [status, response] of Object.entries<Json>(responses)) {
      if (status === '2XX') continue
      const content = response.content['application/json']
      const names: string[] = content.schema.allOf[1].properties.errorName.enum
      t.ok(names.length > 0, `${status} names its errors`)
      for (const name of names) {
        t.ok(name in ERRORS, `${name} is in the table`)
        const example = content.examples[name].value
        t.equal(example.errorName, name)
        // The backend's status is kept: a name by status may stand under another status than the table's (docs/backend-faults.md).
        const byStatus = status.endsWith('XX') || (status === '403' && name === 'accessDenied')
        if (name !== 'headerHasInvalidValue' && !byStatus)
          t.equal(ERRORS[name as keyof typeof ERRORS].status, Number(status), `${name} is ${status}`)
      }
    }
    t.equal(responses['401'].headers['WWW-Authenticate'].schema.const, 'Basic realm="payments", charset="UTF-8"')
    t.ok(responses['405'].headers.Allow, "405 names Allow (POST from the gateway, the backend's own from it)")
    t.ok(responses['429'].headers['Retry-After'], '429 names Retry-After')
    t.same(responses['4XX'].content['application/json'].schema.allOf[1].properties.errorName.enum, ['requestIsRefused'])
    t.same(responses['5XX'].content['application/json'].schema.allOf[1].properties.errorName.enum, [
      'internalErrorOccurred',
    ])
    t.equal(
      responses['415'].content['application/json'].examples.headerHasInvalidValue.value.headerName,
      'Content-Type',
    )
    t.equal(responses['406'].content['application/json'].examples.headerHasInvalidValue.value.headerName, 'Accept')
    t.equal(responses['400'].content['application/json'].examples.headerHasInvalidValue.value.headerName, 'Connection')
  }
})

t.test('the request schemas accept valid bodies and refuse invalid ones (Ajv)', async (t) => {
  const document = buildOpenApi() as Json
  const { sale, recurring } = validatorsOfDefault()
  t.ok(sale(saleBody()), 'a sale validates')
  t.ok(sale(tokenRecurringBody()), 'a recurring body is a valid sale too (intent is optional there)')
  t.ok(recurring(tokenRecurringBody()), 'a recurring authorization validates')
  t.ok(
    sale(saleBody({ instruction: { ...(saleBody().instruction as Json), paymentInstrument: { type: 'wallet/x' } } })),
    'another instrument type',
  )

  const badLuhn = saleBody()
  ;(badLuhn.instruction as Json).paymentInstrument.cardNumber = '4444333322221112'
  t.notOk(sale(badLuhn), 'a card number failing Luhn')
  t.notOk(sale(saleBody({ transactionReference: '' })), 'an empty reference')
  t.notOk(sale(saleBody({ channel: 'post' })), 'a channel other than moto')
  const plainWithoutNumber = saleBody()
  ;(plainWithoutNumber.instruction as Json).paymentInstrument = { type: 'card/plain' }
  t.notOk(sale(plainWithoutNumber), 'card/plain cannot escape into the open branch')
  t.notOk(recurring(saleBody()), 'a recurring authorization needs intent')
  t.notOk(recurring({ ...tokenRecurringBody(), channel: 'moto' }), 'channel is sale-only')
  const json = JSON.stringify(document)
  t.notOk(json.includes('discriminator'), 'no discriminator: see lib/openapi.ts')
  t.ok(json.includes('"x-format"'), 'x-format annotations are kept as extensions')
})

t.test('the answers below HTTP: 408, 431 and requestIsMalformed', async (t) => {
  const document = buildOpenApi() as Json
  for (const path of Object.keys(document.paths)) {
    const { responses } = document.paths[path].post
    for (const [status, name] of [
      [408, 'requestTimedOut'],
      [431, 'headersAreTooLarge'],
      [400, 'requestIsMalformed'],
    ] as const) {
      const content = responses[String(status)].content['application/json']
      t.ok(content.schema.allOf[1].properties.errorName.enum.includes(name), `${status} names ${name}`)
      t.same(content.examples[name].value, reject(name).body, `${name}: the example is the table's body`)
      t.match(responses[String(status)].description, name)
    }
    t.same(responses['408'].content['application/json'].schema.allOf[1].properties.errorName.enum, ['requestTimedOut'])
    t.same(responses['431'].content['application/json'].schema.allOf[1].properties.errorName.enum, [
      'headersAreTooLarge',
    ])
  }
})

t.test("retry protection's answers: 409 with Retry-After and 422", async (t) => {
  const document = buildOpenApi() as Json
  for (const path of Object.keys(document.paths)) {
    const { responses } = document.paths[path].post
    for (const [status, name, backend] of [
      [409, 'paymentIsInProgress', 'requestIsInConflict'],
      [422, 'transactionReferenceIsAlreadyUsed', 'requestIsNotProcessable'],
    ] as const) {
      const content = responses[String(status)].content['application/json']
      t.same(
        content.schema.allOf[1].properties.errorName.enum,
        [name, backend],
        `${status}: the gateway's own, then the backend's by status`,
      )
      t.same(content.examples[name].value, reject(name).body)
    }
    t.ok(responses['409'].headers['Retry-After'], '409 names Retry-After')
  }
})

/** How deeply a parsed body nests, the document itself the first level: what `x-max-depth` bounds. */
function depth(value: unknown): number {
  if (value === null || typeof value !== 'object') return 0
  return 1 + Math.max(0, ...Object.values(value).map(depth))
}

/** Whether a parsed body holds what `x-prototype-keys-refused` names: a `__proto__` key, or a `constructor` object with a `prototype` key, at any depth. */
function prototypeKeys(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false
  if (!Array.isArray(value)) {
    if (Object.hasOwn(value, '__proto__')) return true
    const constructor: unknown = Object.hasOwn(value, 'constructor') ? (value as Json).constructor : undefined
    if (constructor !== null && typeof constructor === 'object' && Object.hasOwn(constructor, 'prototype')) return true
  }
  return Object.values(value).some(prototypeKeys)
}

t.test(
  'prototype keys: the checks refuse them at any depth, and the document says so beside its schemas',
  async (t) => {
    const document = buildOpenApi() as Json
    const validators = validatorsOfDefault()
    const { policies } = await loadPolicyDir(POLICIES_DIR)
    const checks = buildChecks({ policies })
    const withExtra = (extra: string) => `${JSON.stringify(saleBody()).slice(0, -1)},${extra}}`
    for (const name of ['CardOnFileSale', 'MigrateRecurringAuthorization']) {
      const schema = document.components.schemas[name]
      t.equal(schema['x-prototype-keys-refused'], true, `${name}: the extension`)
      t.match(
        schema.description,
        'No `__proto__` key, and no `constructor` object with a `prototype` key, at any depth',
      )
    }
    t.same(
      Object.keys(document.components.schemas),
      ['CardOnFileSale', 'MigrateRecurringAuthorization', 'ErrorBody'],
      'no schema per level, no recursive one: tools choke on them',
    )
    const bodies: [name: string, text: string, refused: boolean][] = [
      ['__proto__ at the top', withExtra('"__proto__":{"admin":true}'), true],
      ['__proto__ as a scalar', withExtra('"__proto__":1'), true],
      ['__proto__ spelt with escapes', withExtra('"\\u005f_proto__":{}'), true],
      [
        '__proto__ inside a known object',
        JSON.stringify(saleBody()).replace('"merchant":{', '"merchant":{"__proto__":{},'),
        true,
      ],
      ['__proto__ deep in an unnamed field', withExtra('"extra":{"a":[{"b":{"__proto__":{}}}]}'), true],
      ['__proto__ in an array of an unnamed field', withExtra('"extra":[[{"__proto__":null}]]'), true],
      ['constructor.prototype at the top', withExtra('"constructor":{"prototype":{"x":1}}'), true],
      ['constructor.prototype deep', withExtra('"extra":{"constructor":{"prototype":null}}'), true],
      ['__proto__ below a harmless constructor', withExtra('"constructor":{"a":{"__proto__":1}}'), true],
      ['constructor holding a string', withExtra('"constructor":"prototype"'), false],
      ['constructor holding an array', withExtra('"constructor":["prototype"]'), false],
      ['constructor without prototype', withExtra('"constructor":{"name":"x"}'), false],
      ['prototype without constructor', withExtra('"prototype":{"constructor":{}}'), false],
      ['a key that only contains __proto__', withExtra('"x__proto__":1,"extra":{"__proto__x":{}}'), false],
    ]
    for (const [name, text, refused] of bodies) {
      const verdict = checks.checkBody('sale', Buffer.from(text))
      t.equal(verdict.ok, !refused, `${name}: the checks`)
      if (!verdict.ok) t.match(verdict.body.validationErrors, [{ errorName: 'fieldIsNotAllowed' }])
      t.equal(prototypeKeys(JSON.parse(text)), refused, `${name}: the rule the document states`)
      if (!refused) t.ok(validators.sale(JSON.parse(text)), `${name}: the document's schema accepts it too`)
    }
    const compiled = JSON.stringify(REQUEST_SCHEMAS)
    t.notOk(compiled.includes('x-prototype-keys-refused'), 'the schemas the gateway compiles are left alone')
  },
)

t.test('depth: the checks refuse a body nested too deeply, where the limit the document states says', async (t) => {
  const document = buildOpenApi() as Json
  const validators = validatorsOfDefault()
  const { policies } = await loadPolicyDir(POLICIES_DIR)
  const checks = buildChecks({ policies })
  for (const name of ['CardOnFileSale', 'MigrateRecurringAuthorization']) {
    const schema = document.components.schemas[name]
    t.equal(schema['x-max-depth'], MAX_DEPTH, `${name}: the extension`)
    t.match(
      schema.description,
      `Objects and arrays nested at most ${MAX_DEPTH} levels deep, the document itself the first`,
    )
  }
  const limit: number = document.components.schemas.CardOnFileSale['x-max-depth']
  const withExtra = (extra: string) => `${JSON.stringify(saleBody()).slice(0, -1)},"extra":${extra}}`
  // The document is the first level: an unnamed member holding n nested containers reaches level n + 1.
  const arrays = (n: number) => `${'['.repeat(n)}1${']'.repeat(n)}`
  const objects = (n: number) => `${'{"a":'.repeat(n)}null${'}'.repeat(n)}`
  const mixed = (n: number) => `${'[{"a":'.repeat(n / 2)}"x"${'}]'.repeat(n / 2)}`
  for (const [name, extra, refused] of [
    ['arrays to the last level allowed', arrays(MAX_DEPTH - 1), false],
    ['arrays one level deeper', arrays(MAX_DEPTH), true],
    ['objects to the last level allowed', objects(MAX_DEPTH - 1), false],
    ['objects one level deeper', objects(MAX_DEPTH), true],
    ['objects and arrays to the last level allowed', mixed(MAX_DEPTH - 2), false],
    ['objects and arrays two levels deeper', mixed(MAX_DEPTH), true],
    ['an empty array at the last level allowed', arrays(MAX_DEPTH - 2).replace('1', '[]'), false],
    ['an empty object one level deeper', arrays(MAX_DEPTH - 1).replace('1', '{}'), true],
  ] as const) {
    const text = withExtra(extra)
    const verdict = checks.checkBody('sale', Buffer.from(text))
    t.equal(verdict.ok, !refused, `${name}: the checks`)
    if (!verdict.ok) t.match(verdict.body, { errorName: 'bodyDoesNotMatchSchema' })
    t.equal(depth(JSON.parse(text)) > limit, refused, `${name}: the limit the document states`)
    if (!refused) t.ok(validators.sale(JSON.parse(text)), `${name}: the document's schema accepts it too`)
  }
})

t.test('the request body states the size limit, the default or the one given', async (t) => {
  for (const [options, limit] of [
    [{}, 65536],
    [{ bodyLimit: 4096 }, 4096],
  ] as const) {
    const document = buildOpenApi(options) as Json
    for (const path of Object.values(OPERATION_PATHS)) {
      const body = document.paths[path].post.requestBody
      t.equal(body['x-max-body-bytes'], limit, `${path}: the extension`)
      t.match(
        body.description,
        `At most ${limit} bytes (the gateway's \`--body-limit\`): a larger body is answered 413`,
      )
      t.match(body.description, `nested at most ${MAX_DEPTH} levels deep`)
    }
    t.equal((await openApiValidator.validate(document)).valid, true, 'still valid OpenAPI 3.1')
  }
})

t.test('each operation has one example that passes every check with the sample policies', async (t) => {
  const document = buildOpenApi() as Json
  const validators = validatorsOfDefault()
  const { policies } = await loadPolicyDir(POLICIES_DIR)
  const checks = buildChecks({ policies })
  for (const operation of OPERATIONS) {
    const content = document.paths[OPERATION_PATHS[operation]].post.requestBody.content[REQUEST_TYPE]
    const { example } = content
    t.type(example, 'object', `${operation} has an example`)
    t.notOk('examples' in content, 'one example, not a map of them')
    t.ok(validators[operation](example), `${operation}: the document's schema accepts its example`)
    const verdict = checks.checkBody(operation, Buffer.from(JSON.stringify(example)))
    t.same(
      verdict.ok ? { operation: verdict.operation, entity: verdict.entity } : verdict,
      { operation, entity: 'default' },
      `${operation}: the checks pass it`,
    )
  }
  const other = buildOpenApi({ vendor: 'acme' }) as Json
  t.ok(
    other.paths[OPERATION_PATHS.sale].post.requestBody.content['application/vnd.acme.payments-v6+json'].example,
    'the example follows the vendor',
  )
})

/** Every text annotation `name` below `node`, by its JSONPath from `path` (what a reader of the document sees). */
function annotations(
  node: unknown,
  name: string,
  path = '$',
  found: Record<string, string> = {},
): Record<string, string> {
  if (node === null || typeof node !== 'object') return found
  for (const [key, child] of Object.entries(node)) {
    const step = Array.isArray(node) ? `${path}[${key}]` : `${path}.${key}`
    if (key === name && typeof child === 'string') found[step] = child
    else annotations(child, name, step, found)
  }
  return found
}

const MERCHANT = '$.properties.merchant.properties'
const FACILITATOR = `${MERCHANT}.paymentFacilitator`
const SUB_MERCHANT = `${FACILITATOR}.properties.subMerchant.properties`
const INSTRUCTION = '$.properties.instruction.properties'
const INSTRUMENT = `${INSTRUCTION}.paymentInstrument`

/** The fields both operations have, as the document describes them (lib/schema/payment.ts). */
const SHARED_DESCRIPTIONS: Record<string, string> = {
  '$.description':
    'Objects and arrays nested at most 64 levels deep, the document itself the first: a deeper body is answered 400 bodyDoesNotMatchSchema. No `__proto__` key, and no `constructor` object with a `prototype` key, at any depth: answered 400 with `fieldIsNotAllowed` at its path.',
  '$.properties.transactionReference.description': 'Unique reference generated by the caller.',
  [`${MERCHANT}.entity.description`]: 'Directs the payment for billing, reporting and reconciliation.',
  [`${MERCHANT}.mcc.description`]: 'Merchant category code for this request; only with the dynamic mcc feature.',
  [`${FACILITATOR}.description`]: 'Payment Facilitator information; required when the caller is a Payment Facilitator.',
  [`${FACILITATOR}.properties.pfId.description`]: 'Facilitator identifier.',
  [`${FACILITATOR}.properties.isoId.description`]: 'ISO identifier.',
  [`${SUB_MERCHANT}.city.description`]: 'Sub-merchant city.',
  [`${SUB_MERCHANT}.name.description`]: 'Sub-merchant name.',
  [`${SUB_MERCHANT}.postalCode.description`]: 'Sub-merchant postal code.',
  [`${SUB_MERCHANT}.merchantId.description`]: 'Sub-merchant identifier.',
  [`${SUB_MERCHANT}.countryCode.description`]: 'Sub-merchant country code.',
  [`${SUB_MERCHANT}.street.description`]: 'Sub-merchant street.',
  [`${SUB_MERCHANT}.telephone.description`]: 'Sub-merchant telephone.',
  [`${SUB_MERCHANT}.taxId.description`]: 'Sub-merchant tax identifier.',
  [`${SUB_MERCHANT}.email.description`]: 'Sub-merchant email.',
  [`${SUB_MERCHANT}.state.description`]: 'Sub-merchant state.',
  [`${INSTRUCTION}.narrative.properties.line1.description`]:
    'First statement line; unsupported characters become spaces; at most 24 characters.',
  [`${INSTRUCTION}.narrative.properties.line2.description`]: 'Additional payment details, such as an order number.',
  [`${INSTRUMENT}.description`]: 'The stored payment instrument.',
  [`${INSTRUMENT}.oneOf[0].properties.cardNumber.description`]: 'The card number (PAN).',
  [`${INSTRUMENT}.oneOf[0].properties.cardHolderName.description`]: 'Name on the card.',
  [`${INSTRUMENT}.oneOf[0].properties.billingAddress.description`]: 'Billing address.',
  [`${INSTRUMENT}.oneOf[1].properties.href.description`]: 'Link to the stored token.',
  [`${INSTRUCTION}.value.properties.amount.description`]:
    'Whole number carrying the currency exponent: with exponent two, 250 means 2.50.',
  [`${INSTRUCTION}.value.properties.currency.description`]: 'ISO 4217 alphabetic currency code.',
  [`${INSTRUCTION}.debtRepayment.description`]: 'Marks the payment as a debt repayment.',
  [`${INSTRUCTION}.intent.description`]: 'Reason for the card on file agreement.',
}

/** The fields only the sale has. */
const SALE_DESCRIPTIONS: Record<string, string> = {
  [`${INSTRUCTION}.scheme.properties.reference.description`]: 'Scheme reference.',
  '$.properties.channel.description': 'Process as a Mail Order or Telephone Order.',
  '$.properties.customer.properties.riskProfile.description': 'Customer risk profile.',
  '$.properties.customer.properties.authentication.description': '3DS or Network Token authentication.',
}

/** The shapes that the field errors name (`x-format`, lib/schema/payment.ts), the same in both operations. */
const FORMATS: Record<string, string> = {
  '$.properties.transactionReference.x-format': 'letters, digits and - _ / ! @ # $ % ( ) * = . : ; ? [ ] { } ~ +',
  [`${MERCHANT}.mcc.x-format`]: 'four digits',
  [`${INSTRUMENT}.oneOf[0].properties.cardNumber.x-format`]: '12 to 19 digits',
  [`${INSTRUMENT}.oneOf[0].properties.cardExpiryDate.properties.month.x-format`]: 'a month from 1 to 12',
  [`${INSTRUMENT}.oneOf[0].properties.cardExpiryDate.properties.year.x-format`]: 'a four-digit year',
  [`${INSTRUMENT}.oneOf[2].properties.type.x-format`]: 'a payment instrument type',
  [`${INSTRUCTION}.value.properties.currency.x-format`]: 'three upper-case letters (ISO 4217)',
}

t.test('every field of the request schemas has its description, and no other', async (t) => {
  const { schemas } = (buildOpenApi() as Json).components
  t.same(
    annotations(schemas.CardOnFileSale, 'description'),
    { ...SHARED_DESCRIPTIONS, ...SALE_DESCRIPTIONS },
    'the sale',
  )
  t.same(
    annotations(schemas.MigrateRecurringAuthorization, 'description'),
    SHARED_DESCRIPTIONS,
    'the recurring authorization',
  )
})

t.test('the request schemas keep their titles and the shapes their field errors name', async (t) => {
  const { schemas } = (buildOpenApi() as Json).components
  t.equal(schemas.CardOnFileSale.title, 'CardOnFileSale')
  t.equal(schemas.MigrateRecurringAuthorization.title, 'MigrateRecurringAuthorization')
  t.same(annotations(schemas.CardOnFileSale, 'x-format'), FORMATS, 'the sale')
  t.same(annotations(schemas.MigrateRecurringAuthorization, 'x-format'), FORMATS, 'the recurring authorization')
})
