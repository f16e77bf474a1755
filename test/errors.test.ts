import { readFileSync } from 'node:fs'
import t from 'tap'
import {
  closing,
  definedRejection,
  ERRORS,
  FIELD_ERRORS,
  fieldError,
  INTERNAL_ERROR,
  isErrorName,
  reject,
  schemaRejection,
  serializeError,
  SERVICE_UNAVAILABLE,
  type ErrorBody,
} from '../lib/errors.js'
import { isErrorBody } from './helpers/oracle.js'

const table = readFileSync(new URL('../docs/checks.md', import.meta.url), 'utf8')

t.test('every error name is in the error tables of docs/checks.md with its status', async (t) => {
  for (const [name, { status }] of Object.entries(ERRORS)) {
    const row = table.split('\n').find((line) => line.startsWith(`| \`${name}\` |`))
    t.ok(row, `${name} has a row`)
    t.match(row ?? '', String(status), `${name}: status ${status}`)
  }
  for (const name of Object.keys(FIELD_ERRORS)) t.ok(table.includes(`| \`${name}\` |`), `${name} has a row`)
})

t.test('the table: statuses the spec and contract give', async (t) => {
  t.equal(ERRORS.accessDenied.status, 401)
  t.equal(ERRORS.bodyIsTooLarge.status, 413)
  t.equal(ERRORS.headersAreTooLarge.status, 431)
  t.equal(ERRORS.requestTimedOut.status, 408)
  t.equal(ERRORS.internalErrorOccurred.status, 500)
  t.equal(ERRORS.serviceUnavailable.status, 503)
  for (const { status, message } of Object.values(ERRORS)) {
    t.ok(status >= 400 && status < 600)
    t.ok(message.length > 10)
  }
})

t.test('reject builds the body from the table, with optional details', async (t) => {
  t.strictSame(reject('bodyIsEmpty'), {
    ok: false,
    status: 400,
    body: { errorName: 'bodyIsEmpty', message: ERRORS.bodyIsEmpty.message },
  })
  const header = reject('headerHasInvalidValue', {
    status: 406,
    headerName: 'Accept',
    message: 'm',
    headers: { Vary: 'Accept' },
  })
  t.strictSame(header, {
    ok: false,
    status: 406,
    body: { errorName: 'headerHasInvalidValue', message: 'm', headerName: 'Accept' },
    headers: { Vary: 'Accept' },
  })
  const items = [fieldError('fieldIsMissing', '$.a')]
  t.strictSame(schemaRejection(items).body.validationErrors, [
    { errorName: 'fieldIsMissing', message: FIELD_ERRORS.fieldIsMissing, jsonPath: '$.a' },
  ])
})

t.test('isErrorName knows the table and nothing else', async (t) => {
  t.ok(isErrorName('serviceUnavailable'))
  t.notOk(isErrorName('toString'))
  t.notOk(isErrorName('fieldIsMissing'))
})

t.test("the serializer writes what JSON.stringify would, in the spec's field order", async (t) => {
  const bodies: ErrorBody[] = [
    { errorName: 'bodyIsEmpty', message: 'm' },
    { errorName: 'headerIsMissing', message: 'quote " and \\ and \u2028', headerName: 'Content-Type' },
    {
      errorName: 'bodyDoesNotMatchSchema',
      message: 'm',
      validationErrors: [{ errorName: 'fieldIsNull', message: 'x', jsonPath: "$['a\\'b']" }],
    },
  ]
  for (const body of bodies) {
    const text = serializeError(body)
    t.strictSame(JSON.parse(text), body)
    t.ok(isErrorBody(JSON.parse(text)))
    t.ok(text.startsWith('{"errorName":'))
  }
})

t.test('closing: the same refusal with Connection: close, made once', async (t) => {
  const refusal = reject('bodyIsTooLarge')
  const closed = closing(refusal)
  t.equal(closed.close, true)
  t.equal(refusal.close, undefined, 'the original is left as it was')
  t.equal(closing(closed), closed, 'an answer already closing is returned as it is')
})

t.test(
  'one refusal value per error without a message of its own; a name a rule defines brings its message',
  async (t) => {
    t.same(INTERNAL_ERROR, reject('internalErrorOccurred'))
    t.same(SERVICE_UNAVAILABLE, reject('serviceUnavailable'))
    t.ok(Object.isFrozen(INTERNAL_ERROR) && Object.isFrozen(SERVICE_UNAVAILABLE))
    t.same(definedRejection('paymentIsDeclined', 'The payment was declined.', 402), {
      ok: false,
      status: 402,
      body: { errorName: 'paymentIsDeclined', message: 'The payment was declined.' },
    })
    t.same(definedRejection('x', 'y', 429, { 'Retry-After': '5' }).headers, { 'Retry-After': '5' })
  },
)

t.test("the error body schema (the OpenAPI document's) refuses what the service never sends", async (t) => {
  const item = { errorName: 'fieldIsNull', message: 'x', jsonPath: '$.a' }
  const body = (validationErrors: unknown[]) => ({
    errorName: 'bodyDoesNotMatchSchema',
    message: 'm',
    validationErrors,
  })
  t.ok(isErrorBody(body([item])))
  for (const field of ['errorName', 'message', 'jsonPath'] as const) {
    const { [field]: _, ...missing } = item
    t.notOk(isErrorBody(body([missing])), `a field error without ${field}`)
    t.notOk(isErrorBody(body([{ ...item, [field]: 1 }])), `a field error whose ${field} is not a string`)
  }
  t.notOk(isErrorBody(body([{ ...item, extra: 'x' }])), 'a field error with a field of its own')
  t.notOk(isErrorBody({ errorName: 'bodyIsEmpty', message: 'm', extra: 'x' }), 'a body with a field of its own')
  const top = { errorName: 'headerIsMissing', message: 'm', headerName: 'Accept' }
  t.ok(isErrorBody(top))
  for (const field of ['errorName', 'message', 'headerName'] as const)
    t.notOk(isErrorBody({ ...top, [field]: 1 }), `a body whose ${field} is not a string`)
  t.notOk(isErrorBody({ message: 'm' }), 'a body without errorName')
  t.notOk(isErrorBody({ errorName: 'bodyIsEmpty' }), 'a body without message')
})
