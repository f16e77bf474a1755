import t from 'tap'
import { Validator } from '@seriousme/openapi-schema-validator'
import { Ajv2020 } from 'ajv/dist/2020.js'
import { luhnValid } from '../lib/luhn.js'
import { buildOpenApi } from '../lib/openapi.js'
import { ERRORS } from '../lib/errors.js'
import { recurringBody, saleBody } from './helpers/case-bodies.js'

type Json = Record<string, any>

function requestSchema(document: Json, path: string, mediaType: string): Json {
  const ref: string = document.paths[path].post.requestBody.content[mediaType].schema.$ref
  return document.components.schemas[ref.replace('#/components/schemas/', '')]
}

t.test('the document is valid OpenAPI 3.1', async (t) => {
  const validator = new Validator()
  const result = await validator.validate(buildOpenApi())
  t.same(result.errors, undefined)
  t.equal(result.valid, true)
  t.equal(validator.version, '3.1')
  const withOptions = await new Validator().validate(buildOpenApi({ vendor: 'acme', basePath: 'api/' }))
  t.equal(withOptions.valid, true)
})

t.test('vendor and base path shape the paths and media types', async (t) => {
  const document = buildOpenApi({ vendor: 'acme', basePath: 'api/' }) as Json
  t.same(Object.keys(document.paths), ['/api/payments/sales/migrateCardOnFile', '/api/payments/authorizations/migrateRecurring'])
  const sale = document.paths['/api/payments/sales/migrateCardOnFile'].post
  t.same(Object.keys(sale.requestBody.content), ['application/vnd.acme.payments-v6+json'])
  t.same(Object.keys(sale.responses['2XX'].content), ['application/vnd.acme.payments-v6.hal+json'])
  t.same(sale.security, [{ BasicAuth: [] }])
  t.same(document.components.securitySchemes.BasicAuth, { type: 'http', scheme: 'basic' })
})

t.test('error responses name their errorNames and match the error table', async (t) => {
  const document = buildOpenApi() as Json
  for (const path of Object.keys(document.paths)) {
    const { responses } = document.paths[path].post
    t.same(Object.keys(responses).sort(), ['2XX', '400', '401', '405', '406', '413', '415', '500', '503'])
    for (const [status, response] of Object.entries<Json>(responses)) {
      if (status === '2XX') continue
      const content = response.content['application/json']
      const names: string[] = content.schema.allOf[1].properties.errorName.enum
      t.ok(names.length > 0, `${status} names its errors`)
      for (const name of names) {
        t.ok(name in ERRORS, `${name} is in the table`)
        const example = content.examples[name].value
        t.equal(example.errorName, name)
        if (name !== 'headerHasInvalidValue') t.equal(ERRORS[name as keyof typeof ERRORS].status, Number(status), `${name} is ${status}`)
      }
    }
    t.equal(responses['401'].headers['WWW-Authenticate'].schema.const, 'Basic realm="payments", charset="UTF-8"')
    t.equal(responses['405'].headers.Allow.schema.const, 'POST')
    t.equal(responses['415'].content['application/json'].examples.headerHasInvalidValue.value.headerName, 'Content-Type')
    t.equal(responses['406'].content['application/json'].examples.headerHasInvalidValue.value.headerName, 'Accept')
  }
})

t.test('the request schemas accept valid bodies and refuse invalid ones (Ajv)', async (t) => {
  const document = buildOpenApi() as Json
  const ajv = new Ajv2020({ allErrors: true, strict: false })
  ajv.addFormat('luhn', luhnValid)
  const mediaType = 'application/vnd.example.payments-v6+json'
  const sale = ajv.compile(requestSchema(document, '/payments/sales/migrateCardOnFile', mediaType))
  const recurring = ajv.compile(requestSchema(document, '/payments/authorizations/migrateRecurring', mediaType))
  t.ok(sale(saleBody()), 'a sale validates')
  t.ok(sale(recurringBody()), 'a recurring body is a valid sale too (intent is optional there)')
  t.ok(recurring(recurringBody()), 'a recurring authorization validates')
  t.ok(sale(saleBody({ instruction: { ...(saleBody().instruction as Json), paymentInstrument: { type: 'wallet/x' } } })), 'another instrument type')

  const badLuhn = saleBody()
  ;(badLuhn.instruction as Json).paymentInstrument.cardNumber = '4444333322221112'
  t.notOk(sale(badLuhn), 'a card number failing Luhn')
  t.notOk(sale(saleBody({ transactionReference: '' })), 'an empty reference')
  t.notOk(sale(saleBody({ channel: 'post' })), 'a channel other than moto')
  const plainWithoutNumber = saleBody()
  ;(plainWithoutNumber.instruction as Json).paymentInstrument = { type: 'card/plain' }
  t.notOk(sale(plainWithoutNumber), 'card/plain cannot escape into the open branch')
  t.notOk(recurring(saleBody()), 'a recurring authorization needs intent')
  t.notOk(recurring({ ...recurringBody(), channel: 'moto' }), 'channel is sale-only')
  const json = JSON.stringify(document)
  t.notOk(json.includes('discriminator'), 'no discriminator: see lib/openapi.ts')
  t.ok(json.includes('"x-format"'), 'x-format annotations are kept as extensions')
})
