import fc from 'fast-check'
import t from 'tap'
import { bytes, RECURRING_PATH, recurringBody, SALE_PATH, saleBody } from '../helpers/fixtures.js'
import { HUGE_FIELDS, HUGE_VALUES, runs, setPath } from '../helpers/fuzz.js'
import { keepAliveSender, paymentHeaders } from '../helpers/http.js'
import { scanLogsForCards, watchCrashes } from '../helpers/logs.js'
import { ajvRecurring, ajvSale, isErrorBody } from '../helpers/oracle.js'
import { startGateway } from '../helpers/surfaces.js'

/**
 * The core's hostile bodies (test/property/core.test.ts) again, this time as
 * real requests through the gateway to a real backend, with the right headers
 * and valid credentials. Properties: no crash, no unhandled rejection; every
 * answer is a contract status with a well-formed error body (Ajv) and then
 * the backend received nothing, or a forward and then the backend received
 * exactly one document, valid by Ajv, with a correct Content-Length;
 * Object.prototype untouched. FUZZ_RUNS scales the runs (`npm run fuzz`).
 */
const noCrashes = watchCrashes(t)
const { url, backend } = await startGateway(t, { gate: { bodyLimit: 1 << 20 } })
const post = keepAliveSender(t, url)
/** What a body alone can be refused with: schema and the rest (400), entity access (401), size (413). */
const BODY_STATUSES = new Set([400, 401, 413])

type Op = 'sale' | 'recurring'
const PATHS = { sale: SALE_PATH, recurring: RECURRING_PATH }
const VALIDATORS = { sale: ajvSale, recurring: ajvRecurring }

interface Outcome {
  readonly forwarded: boolean
  readonly wellFormed: boolean
  readonly errorName?: string
}

/** One request through the gateway, judged by what the client got and what the backend saw. */
async function through(op: Op, body: Uint8Array): Promise<Outcome> {
  const before = backend.received.length
  const reply = await post({ path: PATHS[op], headers: paymentHeaders(), body: Buffer.from(body) })
  // The backend records a request before it answers, so all of it is in by now.
  const seen = backend.received.slice(before)
  if (reply.status === 201) {
    const [got] = seen
    const valid =
      seen.length === 1 &&
      got?.url === PATHS[op] &&
      got.headers['content-length'] === String(got.body.length) &&
      VALIDATORS[op](JSON.parse(got.body.toString('utf8')))
    return { forwarded: true, wellFormed: valid }
  }
  const wellFormed =
    BODY_STATUSES.has(reply.status) &&
    reply.headers['content-type'] === 'application/json' &&
    isErrorBody(reply.json) &&
    seen.length === 0
  return { forwarded: false, wellFormed, errorName: reply.json?.errorName }
}

function untouched(): boolean {
  return Object.keys(Object.prototype).length === 0 && ({} as Record<string, unknown>).polluted === undefined
}

const operation = fc.constantFrom<Op>('sale', 'recurring')
const validText = operation.map((op) => [op, JSON.stringify(op === 'sale' ? saleBody() : recurringBody())] as const)

t.test('random bytes', async (t) => {
  await fc.assert(
    fc.asyncProperty(
      operation,
      fc.uint8Array({ maxLength: 2048 }),
      async (op, body) => (await through(op, body)).wellFormed,
    ),
    runs(0.2),
  )
  t.ok(untouched())
})

t.test('a byte that breaks UTF-8: bodyIsNotJson, nothing forwarded', async (t) => {
  const before = backend.received.length
  await fc.assert(
    fc.asyncProperty(validText, fc.nat(), fc.integer({ min: 0x80, max: 0xff }), async ([op, text], at, byte) => {
      const body = Buffer.from(text)
      const position = at % body.length
      const outcome = await through(
        op,
        Buffer.concat([body.subarray(0, position), Buffer.from([byte]), body.subarray(position)]),
      )
      return outcome.wellFormed && outcome.errorName === 'bodyIsNotJson'
    }),
    runs(0.15),
  )
  t.equal(backend.received.length, before, 'the backend received none of them')
})

t.test('truncated bodies: never forwarded', async (t) => {
  const before = backend.received.length
  await fc.assert(
    fc.asyncProperty(validText, fc.nat(), async ([op, text], at) => {
      const outcome = await through(op, Buffer.from(text.slice(0, at % text.length)))
      return outcome.wellFormed && (outcome.errorName === 'bodyIsNotJson' || outcome.errorName === 'bodyIsEmpty')
    }),
    runs(0.15),
  )
  t.equal(backend.received.length, before, 'the backend received none of them')
})

t.test('nesting to 100k levels: refused, nothing forwarded, the gateway still answers', async (t) => {
  for (const [open, close] of [
    ['[', ']'],
    ['{"a":', '}'],
  ] as const) {
    for (const depth of [1000, 100_000]) {
      const closed = await through(
        'sale',
        Buffer.from(`{"transactionReference":${open.repeat(depth)}1${close.repeat(depth)}}`),
      )
      t.match(closed, { forwarded: false, wellFormed: true, errorName: 'bodyDoesNotMatchSchema' }, `${open} x ${depth}`)
      const unclosed = await through('sale', Buffer.from(open.repeat(depth)))
      t.match(
        unclosed,
        { forwarded: false, wellFormed: true, errorName: 'bodyIsNotJson' },
        `unclosed ${open} x ${depth}`,
      )
    }
  }
  t.match(await through('sale', bytes(saleBody())), { forwarded: true, wellFormed: true })
})

t.test('__proto__ and constructor.prototype keys anywhere: refused, the prototype untouched', async (t) => {
  const poison = fc.constantFrom(
    '{"__proto__":{"polluted":1}}',
    '{"constructor":{"prototype":{"polluted":1}}}',
    '{"\\u005f_proto__":{"polluted":1}}',
  )
  await fc.assert(
    fc.asyncProperty(validText, fc.nat(), poison, async ([op, text], at, key) => {
      const opens = [...text.matchAll(/\{/g)].map((match) => match.index as number)
      const position = (opens[at % opens.length] as number) + 1
      const outcome = await through(op, Buffer.from(`${text.slice(0, position)}"x":${key},${text.slice(position)}`))
      return outcome.wellFormed && !outcome.forwarded && untouched()
    }),
    runs(0.15),
  )
  t.ok(untouched())
})

t.test('huge strings and numbers', async (t) => {
  await fc.assert(
    fc.asyncProperty(operation, HUGE_FIELDS, HUGE_VALUES, async (op, path, value) => {
      const body = op === 'sale' ? saleBody() : recurringBody()
      setPath(body, path, value)
      return (await through(op, bytes(body))).wellFormed
    }),
    runs(0.15),
  )
  for (const literal of ['1e400', '1' + '0'.repeat(400)]) {
    const text = JSON.stringify(saleBody()).replace('"amount":250', `"amount":${literal}`)
    t.match(
      await through('sale', Buffer.from(text)),
      { forwarded: false, wellFormed: true, errorName: 'bodyDoesNotMatchSchema' },
      literal,
    )
  }
})

t.test('random mutations of valid bodies: refused well-formed, or forwarded valid', async (t) => {
  let forwarded = 0
  await fc.assert(
    fc.asyncProperty(
      operation,
      fc.array(fc.tuple(fc.nat(), fc.jsonValue({ maxDepth: 2 })), { maxLength: 3 }),
      async (op, edits) => {
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
          target[keys[Math.floor(at / objects.length) % keys.length] as string] = value
        }
        const outcome = await through(op, bytes(body))
        if (outcome.forwarded) forwarded++
        return outcome.wellFormed
      },
    ),
    runs(0.3),
  )
  t.ok(forwarded > 0, `some mutations still pass (${forwarded})`)
  t.ok(untouched())
})

scanLogsForCards(t)
noCrashes()
