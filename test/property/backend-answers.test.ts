import fc from 'fast-check'
import t from 'tap'
import { OTHER_PATH, saleBody } from '../helpers/fixtures.js'
import { runs } from '../helpers/fuzz.js'
import { paymentHeaders, send, type SendOptions } from '../helpers/http.js'
import { watchCrashes } from '../helpers/logs.js'
import { startRawBackend } from '../helpers/servers.js'
import { startGateway } from '../helpers/surfaces.js'

/**
 * Backend answers of any shape (docs/backend-faults.md, what the backend's head may hold): a raw
 * backend writes generated status lines, reason phrases, headers, 1xx answers and framing (length,
 * chunked, close-delimited, each whole or cut short), to a payment (undici) and to a passed-through
 * path (http-proxy-3). Properties: the gateway never crashes and still answers afterwards; the client
 * gets a whole HTTP answer, or a cut connection once a streamed head went out; a payment is answered
 * with the backend's status or the fault table's (500, 503). FUZZ_RUNS scales the runs.
 */
const noCrashes = watchCrashes(t)
const backend = await startRawBackend(t)
const { url } = await startGateway(t, { target: backend.url, timeout: 2000 })

/** Latin-1 text without CR and LF (which would end the line), control characters included. */
const latin1 = (maxLength: number) =>
  fc
    .array(
      fc.integer({ min: 0, max: 255 }).filter((code) => code !== 10 && code !== 13),
      { maxLength },
    )
    .map((codes) => String.fromCharCode(...codes))

const FRAMINGS = ['length', 'long-length', 'chunked', 'chunked-cut', 'close'] as const

const answers = fc.record({
  informational: fc.constantFrom(
    '',
    'HTTP/1.1 100 Continue\r\n\r\n',
    'HTTP/1.1 102 Processing\r\n\r\n',
    'HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n',
  ),
  status: fc.oneof(fc.integer({ min: 100, max: 599 }), fc.constantFrom(0, 99, 600, 999)),
  reason: latin1(12),
  headers: fc.array(
    fc.tuple(
      fc.constantFrom('X-A', 'Set-Cookie', 'Content-Type', 'Retry-After', 'WWW-Authenticate', 'X(Bad', 'X A', 'Ä'),
      latin1(10),
    ),
    { maxLength: 3 },
  ),
  framing: fc.constantFrom(...FRAMINGS),
  body: fc.string({ maxLength: 20 }),
})

type Generated = typeof answers extends fc.Arbitrary<infer T> ? T : never

function bytesOf(answer: Generated): Buffer {
  const { body } = answer
  let head = `${answer.informational}HTTP/1.1 ${String(answer.status).padStart(3, '0')} ${answer.reason}\r\n`
  for (const [name, value] of answer.headers) head += `${name}: ${value}\r\n`
  const framed = {
    length: `Content-Length: ${body.length}\r\n\r\n${body}`,
    'long-length': `Content-Length: ${body.length + 5}\r\n\r\n${body}`,
    chunked: `Transfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
    'chunked-cut': `Transfer-Encoding: chunked\r\n\r\n${(body.length + 5).toString(16)}\r\n${body}`,
    close: `Connection: close\r\n\r\n${body}`,
  }[answer.framing]
  return Buffer.from(head + framed, 'latin1')
}

/** The client's view: a status, or a cut connection. */
async function outcome(options: SendOptions): Promise<number | 'cut'> {
  return send(url, options).then(
    (reply) => reply.status,
    () => 'cut' as const,
  )
}

t.test('any backend answer, on both engines: an HTTP answer or a cut once streamed, never a crash', async (t) => {
  const failures: string[] = []
  await fc.assert(
    fc.asyncProperty(answers, async (answer) => {
      const bytes = bytesOf(answer)
      backend.answer = (socket) => socket.end(bytes)
      const payment = await outcome({ headers: paymentHeaders(), body: saleBody() })
      const other = await outcome({ method: 'GET', path: OTHER_PATH })
      // node writes any three-digit status from 100 on: a 600 is relayed as one (and read whole, as a 5xx is).
      const valid = answer.status >= 100
      // A payment: the backend's status or the fault table's; cut only once a 2xx or 3xx head went out.
      const paymentHolds =
        payment === 'cut'
          ? valid && answer.status < 400
          : payment === 500 || payment === 503 || (valid && payment === answer.status)
      // Another path streams every answer but a 5xx: cut only once such a head went out.
      const otherHolds =
        other === 'cut' ? valid && answer.status < 500 : other === 500 || other === 503 || other === answer.status
      if (!paymentHolds || !otherHolds)
        failures.push(`${JSON.stringify(bytes.toString('latin1'))}: ${payment}, ${other}`)
      return paymentHolds && otherHolds
    }),
    runs(0.3),
  )
  t.same(failures, [])
  backend.answer = (socket) => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok')
  const after = await send(url, { method: 'GET', path: OTHER_PATH })
  t.same([after.status, after.text], [200, 'ok'], 'the gateway still answers')
})

noCrashes()
