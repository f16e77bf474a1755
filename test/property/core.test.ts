import fc from 'fast-check'
import t from 'tap'
import { serializeError } from '../../lib/errors.js'
import { buildChecks, type Verdict } from '../../lib/checks/index.js'
import { bytes, policies, recurringBody, saleBody } from '../helpers/fixtures.js'
import { HUGE_FIELDS, HUGE_VALUES, runs, setPath } from '../helpers/fuzz.js'
import { ajvRecurring, ajvSale, isErrorBody } from '../helpers/oracle.js'

/**
 * Hostile bodies through the pure core. Properties: no exception; every
 * answer is a contract status with a well-formed error body, or a forward
 * whose document passes the schema by an independent validator (Ajv) and
 * survives serialization; Object.prototype untouched.
 */
const LIMIT = 1 << 20
const checks = buildChecks({ policies: policies(), bodyLimit: LIMIT })
const BODY_STATUSES = new Set([400, 401, 413])

function wellFormed(operation: 'sale' | 'recurring', verdict: Verdict): boolean {
  if (verdict.ok) {
    const forwarded = JSON.parse(JSON.stringify(verdict.document)) as { merchant: { entity: string } }
    return (operation === 'sale' ? ajvSale : ajvRecurring)(forwarded) && forwarded.merchant.entity === verdict.entity
  }
  return BODY_STATUSES.has(verdict.status) && isErrorBody(JSON.parse(serializeError(verdict.body)))
}

function untouched(): boolean {
  return Object.keys(Object.prototype).length === 0 && ({} as Record<string, unknown>).polluted === undefined
}

const operation = fc.constantFrom<'sale' | 'recurring'>('sale', 'recurring')
const validText = operation.map((op) => [op, JSON.stringify(op === 'sale' ? saleBody() : recurringBody())] as const)

t.test('random bytes', async (t) => {
  fc.assert(
    fc.property(operation, fc.uint8Array({ maxLength: 2048 }), (op, body) =>
      wellFormed(op, checks.checkBody(op, body)),
    ),
    runs(),
  )
  t.ok(untouched())
})

t.test('valid bodies with a byte that breaks UTF-8 are bodyIsNotJson', async (t) => {
  fc.assert(
    fc.property(validText, fc.nat(), fc.integer({ min: 0x80, max: 0xff }), ([op, text], at, byte) => {
      const body = Buffer.from(text)
      const position = at % body.length
      const broken = Buffer.concat([body.subarray(0, position), Buffer.from([byte]), body.subarray(position)])
      const verdict = checks.checkBody(op, broken)
      return wellFormed(op, verdict) && !verdict.ok && verdict.body.errorName === 'bodyIsNotJson'
    }),
    runs(),
  )
})

t.test('truncated bodies are never forwarded', async (t) => {
  fc.assert(
    fc.property(validText, fc.nat(), ([op, text], at) => {
      const cut = text.slice(0, at % text.length)
      const verdict = checks.checkBody(op, Buffer.from(cut))
      return (
        wellFormed(op, verdict) &&
        !verdict.ok &&
        (verdict.body.errorName === 'bodyIsNotJson' || verdict.body.errorName === 'bodyIsEmpty')
      )
    }),
    runs(),
  )
})

t.test('nesting to 100k levels is refused without a crash', async (t) => {
  for (const [open, close] of [
    ['[', ']'],
    ['{"a":', '}'],
  ] as const) {
    for (const depth of [65, 1000, 100_000]) {
      const text = `{"transactionReference":${open.repeat(depth)}1${close.repeat(depth)}}`
      const verdict = buildChecks({ policies: policies(), bodyLimit: 1 << 23 }).checkBody('sale', Buffer.from(text))
      t.match(
        verdict,
        { ok: false, status: 400, body: { validationErrors: [{ errorName: 'fieldHasInvalidValue', jsonPath: '$' }] } },
        `${open} x ${depth}`,
      )
      const truncated = buildChecks({ policies: policies(), bodyLimit: 1 << 23 }).checkBody(
        'sale',
        Buffer.from(open.repeat(depth)),
      )
      t.match(truncated, { ok: false, body: { errorName: 'bodyIsNotJson' } }, `unclosed ${open} x ${depth}`)
    }
  }
})

t.test('__proto__ and constructor.prototype keys anywhere are refused, the prototype untouched', async (t) => {
  const poison = fc.constantFrom(
    '{"__proto__":{"polluted":1}}',
    '{"constructor":{"prototype":{"polluted":1}}}',
    '{"\\u005f_proto__":{"polluted":1}}',
  )
  fc.assert(
    fc.property(validText, fc.nat(), poison, ([op, text], at, key) => {
      // Splice the poisoned object in as the value of a new member of some object in the body.
      const opens = [...text.matchAll(/\{/g)].map((match) => match.index as number)
      const position = (opens[at % opens.length] as number) + 1
      const body = `${text.slice(0, position)}"x":${key},${text.slice(position)}`
      const verdict = checks.checkBody(op, Buffer.from(body))
      return wellFormed(op, verdict) && !verdict.ok && untouched()
    }),
    runs(),
  )
  t.ok(untouched())
})

t.test('huge strings and numbers', async (t) => {
  fc.assert(
    fc.property(operation, HUGE_FIELDS, HUGE_VALUES, (op, path, value) => {
      const body = op === 'sale' ? saleBody() : recurringBody()
      setPath(body, path, value)
      return wellFormed(op, checks.checkBody(op, bytes(body)))
    }),
    runs(0.3),
  )
  for (const literal of ['1e400', '-1e400', '1' + '0'.repeat(400)]) {
    const text = JSON.stringify(saleBody()).replace('"amount":250', `"amount":${literal}`)
    t.match(
      checks.checkBody('sale', Buffer.from(text)),
      { status: 400, body: { validationErrors: [{ jsonPath: '$.instruction.value.amount' }] } },
      literal,
    )
  }
})

t.test('random mutations of valid bodies: refused well-formed, or forwarded valid', async (t) => {
  let forwarded = 0
  fc.assert(
    fc.property(
      operation,
      fc.array(fc.tuple(fc.nat(), fc.jsonValue({ maxDepth: 2 })), { maxLength: 3 }),
      (op, edits) => {
        const body = op === 'sale' ? saleBody() : recurringBody()
        const objects = [
          body,
          body.merchant,
          body.instruction,
          body.instruction.narrative,
          body.instruction.paymentInstrument,
          body.instruction.value,
        ]
        for (const [at, value] of edits) {
          const target = objects[at % objects.length] as Record<string, unknown>
          const keys = Object.keys(target)
          const key = keys[Math.floor(at / objects.length) % keys.length] as string
          target[key] = value
        }
        const verdict = checks.checkBody(op, bytes(body))
        if (verdict.ok) forwarded++
        return wellFormed(op, verdict)
      },
    ),
    runs(),
  )
  t.ok(forwarded > 0, `some mutations still pass (${forwarded})`)
  t.ok(untouched())
})
