import { Agent, IncomingMessage, request, ServerResponse, type OutgoingHttpHeaders } from 'node:http'
import { Socket } from 'node:net'
import fc from 'fast-check'
import t from 'tap'
import { Client, type Dispatcher } from 'undici'
import { OTHER_PATH, SALE_PATH, saleBody } from '../helpers/fixtures.js'
import { runs } from '../helpers/fuzz.js'
import { paymentHeaders } from '../helpers/http.js'
import { watchCrashes } from '../helpers/logs.js'
import { startRawBackend } from '../helpers/servers.js'
import { startGateway } from '../helpers/surfaces.js'

/**
 * Backend answers of any shape (docs/backend-faults.md, what the backend's head may hold): a raw
 * backend writes generated status lines, reason phrases, headers, 1xx answers and framing (length,
 * chunked, close-delimited, each whole or cut short, or followed by bytes past its end), to a payment (undici) and to a passed-through
 * path (http-proxy-3, on node's HTTP client). The oracle reads each answer from the backend directly,
 * without the gateway, with the engine that reads it behind the gateway: node's HTTP client for a
 * passed-through path, undici for a payment; and node's `writeHead` says which statuses node writes.
 * Properties: the gateway never crashes and still answers afterwards. An answer the engine refuses,
 * or whose status node cannot write, gets the fault table's 500; one past 599 a 500; any other keeps its status: one the
 * relay streams (a 2xx or 3xx, and on another path a 4xx) with every end-to-end header as the engine
 * read it, whole or cut where the backend cut it, except that a payment's answer that broke before any of
 * its body, or that is a 307 or 308, gets the fault table's 500 (its head goes out with the body's first piece,
 * and a redirect that keeps the method would have the client pay again: docs/backend-faults.md);
 * one read whole first (a 5xx, and on a payment a 4xx) is answered whole, with the fault table's 500 when
 * its body was cut. FUZZ_RUNS scales the runs.
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

const FRAMINGS = ['length', 'long-length', 'surplus', 'chunked', 'chunked-cut', 'close'] as const

const answers = fc.record({
  informational: fc.constantFrom(
    '',
    'HTTP/1.1 100 Continue\r\n\r\n',
    'HTTP/1.1 102 Processing\r\n\r\n',
    'HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n',
  ),
  // Half of them the statuses a payment mostly gets and those the relay treats apart: none, out of range, no content,
  // redirects that keep the method.
  status: fc.oneof(fc.integer({ min: 100, max: 599 }), fc.constantFrom(0, 99, 600, 999, 200, 201, 204, 304, 307, 308)),
  reason: latin1(12),
  headers: fc.array(
    fc.tuple(
      fc.constantFrom(
        'X-A',
        'Set-Cookie',
        'Content-Type',
        'Retry-After',
        'WWW-Authenticate',
        'Upgrade',
        'X(Bad',
        'X A',
        'Ä',
      ),
      // Visible text as often as any Latin-1, so that many answers are read and their headers compared.
      fc.oneof(
        latin1(10),
        fc.string({ maxLength: 10, unit: fc.integer({ min: 32, max: 126 }).map((code) => String.fromCharCode(code)) }),
      ),
    ),
    { maxLength: 3 },
  ),
  framing: fc.constantFrom(...FRAMINGS),
  // An empty body one time in four: cut short, it breaks before any byte of it.
  body: fc.oneof({ weight: 1, arbitrary: fc.constant('') }, { weight: 3, arbitrary: fc.string({ maxLength: 20 }) }),
})

type Generated = typeof answers extends fc.Arbitrary<infer T> ? T : never

function bytesOf(answer: Generated): Buffer {
  const { body } = answer
  let head = `${answer.informational}HTTP/1.1 ${String(answer.status).padStart(3, '0')} ${answer.reason}\r\n`
  for (const [name, value] of answer.headers) head += `${name}: ${value}\r\n`
  const framed = {
    length: `Content-Length: ${body.length}\r\n\r\n${body}`,
    'long-length': `Content-Length: ${body.length + 5}\r\n\r\n${body}`,
    surplus: `Content-Length: ${body.length}\r\n\r\n${body}EXTRA`,
    chunked: `Transfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
    'chunked-cut': `Transfer-Encoding: chunked\r\n\r\n${(body.length + 5).toString(16)}\r\n${body}`,
    close: `Connection: close\r\n\r\n${body}`,
  }[answer.framing]
  return Buffer.from(head + framed, 'latin1')
}

/**
 * What a reader got of an answer: nothing (`refused`), or its status and raw header list, whether
 * its body came whole, whether the reader met an error on it (bytes after a whole answer, say), and
 * how many bytes of its body it read.
 */
type Read = 'refused' | { status: number; headers: string[]; complete: boolean; faulted: boolean; bytes: number }

/** Reads with node's HTTP client: the backend as http-proxy-3 reads it (`agent`: kept alive), the gateway as a client. */
function nodeRead(
  url: string,
  method: string,
  headers: OutgoingHttpHeaders,
  body?: string,
  agent: Agent | false = false,
): Promise<Read> {
  return new Promise((resolve) => {
    let read: Read = 'refused'
    let faulted = false
    const req = request(url, { method, headers, agent }, (res) => {
      const head = {
        status: res.statusCode as number,
        headers: res.rawHeaders,
        complete: false,
        faulted: false,
        bytes: 0,
      }
      read = head
      res.on('error', () => (faulted = true))
      res.on('data', (chunk: Buffer) => (head.bytes += chunk.length))
      res.on('end', () => (head.complete = true))
    })
    req.on('error', () => (faulted = true))
    // Every way out of a request ends here, after the end of a whole answer.
    req.on('close', () => resolve(read === 'refused' ? read : { ...read, faulted }))
    req.end(body)
  })
}

/** Reads a payment with undici, as the gateway forwards it, through the dispatcher API that hands the raw header list. */
function undiciRead(origin: string, body: string): Promise<Read> {
  const client = new Client(origin, { allowH2: false, pipelining: 1 })
  const read = new Promise<Read>((resolve) => {
    let head: Exclude<Read, 'refused'> | undefined
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart: () => undefined,
      onResponseStart(controller, status) {
        // 1xx answers come before the real one.
        if (status >= 200)
          head = { status, headers: latin1Strings(controller.rawHeaders), complete: false, faulted: false, bytes: 0 }
      },
      onResponseData(_controller, chunk) {
        if (head !== undefined) head.bytes += chunk.length
      },
      onResponseEnd: () => resolve(head === undefined ? 'refused' : { ...head, complete: true }),
      onResponseError: () => resolve(head === undefined ? 'refused' : { ...head, faulted: true }),
    }
    client.dispatch({ path: SALE_PATH, method: 'POST', headers: paymentHeaders(), body }, handler)
  })
  return read.finally(() => client.destroy())
}

function latin1Strings(raw: unknown): string[] {
  return (raw as Buffer[]).map((bytes) => bytes.toString('latin1'))
}

/** Whether node's `writeHead` writes the status (it throws below 100 and above 999). */
function nodeWrites(status: number): boolean {
  try {
    new ServerResponse(new IncomingMessage(new Socket())).writeHead(status)
    return true
  } catch {
    return false
  }
}

/** RFC 9110 7.6.1: the headers that stop at a proxy, and those its `Connection` header names; the gateway's own request id replaces the backend's. */
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']

/** RFC 9110 5.5: a field value does not include the whitespace around it, which a reader may keep (undici) or drop (node). */
const fieldValue = (value: string) => value.replace(/^[\t ]+|[\t ]+$/g, '')

/** The end-to-end headers of an answer; on a 204, without `Content-Length`, which RFC 9110 8.6 forbids there. */
function endToEnd(raw: string[], status: number): string[] {
  const stop = new Set([...HOP_BY_HOP, 'x-request-id', ...(status === 204 ? ['content-length'] : [])])
  for (let i = 0; i < raw.length; i += 2)
    if ((raw[i] as string).toLowerCase() === 'connection')
      for (const name of (raw[i + 1] as string).split(',')) stop.add(name.trim().toLowerCase())
  const pairs: string[] = []
  for (let i = 0; i < raw.length; i += 2)
    if (!stop.has((raw[i] as string).toLowerCase())) pairs.push(`${raw[i]}: ${fieldValue(raw[i + 1] as string)}`)
  return pairs
}

/** The headers of `expected` missing from `got`, each counted as often as it came. */
function missing(expected: string[], got: string[]): string[] {
  const left = got.reduce(
    (pairs, _, i) => (i % 2 === 0 ? [...pairs, `${got[i]}: ${fieldValue(got[i + 1] as string)}`] : pairs),
    [] as string[],
  )
  return expected.filter((pair) => {
    const at = left.indexOf(pair)
    if (at !== -1) left.splice(at, 1)
    return at === -1
  })
}

/**
 * Whether the client got what the engine's reading calls for; `readWholeFrom`: the lowest status the
 * relay reads whole before it answers, `payment`: whether the path is an operation's (docs/backend-faults.md).
 * Counts the answers whose headers were compared, so that the run shows it compared some.
 */
function holds(
  engine: Read,
  client: Read,
  readWholeFrom: number,
  payment: boolean,
  compared: { headers: number },
): boolean {
  const whole = (read: Read) => read !== 'refused' && read.complete && !read.faulted
  const fault = client !== 'refused' && client.status === 500 && whole(client)
  // A 1xx is never a final answer (RFC 9110 15.2): one that a reader takes for one (a 101 without Upgrade) is broken.
  if (engine === 'refused' || !nodeWrites(engine.status) || engine.status < 200) return fault
  // A redirect that keeps the method and body would have the client send the payment again (docs/backend-faults.md).
  if (payment && (engine.status === 307 || engine.status === 308)) return fault
  // Read whole first: the backend's status when it came whole, the fault table's when it broke; a status
  // past 599 is none, and goes on as a 500 (RFC 9110 15: a client reads it as a 5xx).
  if (engine.status >= readWholeFrom) {
    const status = engine.status > 599 ? 500 : engine.status
    if (whole(engine)) return client !== 'refused' && client.status === status && whole(client)
    return fault || (engine.complete && client !== 'refused' && client.status === status && whole(client))
  }
  // Streamed: the head goes out with the first bytes of the body, so a payment's answer that broke before
  // any is still the fault table's 500, and another path's may reach the client as a cut without a status.
  // One that came whole reaches it whole, also when bytes past its end (a 204's body, a body longer than
  // its length) made the reader fail after it.
  if (payment && !engine.complete && engine.bytes === 0) return fault
  if (client === 'refused') return !engine.complete
  if (client.status !== engine.status) return false
  if (engine.complete ? !whole(client) : client.complete) return false
  compared.headers++
  return missing(endToEnd(engine.headers, engine.status), client.headers).length === 0
}

t.test(
  "any backend answer, on both engines: what the engine read of it, or the fault table's 500 when it refused it",
  async (t) => {
    const compared = { headers: 0 }
    const body = JSON.stringify(saleBody())
    const keptAlive = new Agent({ keepAlive: true })
    t.teardown(() => keptAlive.destroy())
    // The last failing run is fast-check's shrunk counterexample: what each reader got of it goes with the failure.
    let smallest: unknown
    await fc
      .assert(
        fc.asyncProperty(answers, async (answer) => {
          const bytes = bytesOf(answer)
          backend.answer = (socket) => socket.end(bytes)
          const engines = {
            payment: await undiciRead(backend.url, body),
            other: await nodeRead(`${backend.url}${OTHER_PATH}`, 'GET', {}, undefined, keptAlive),
          }
          const payment = await nodeRead(`${url}${SALE_PATH}`, 'POST', paymentHeaders(), body)
          const other = await nodeRead(`${url}${OTHER_PATH}`, 'GET', {})
          const ok =
            holds(engines.payment, payment, 400, true, compared) && holds(engines.other, other, 500, false, compared)
          if (!ok) smallest = { answer: bytes.toString('latin1'), engines, payment, other }
          return ok
        }),
        runs(0.3),
      )
      .catch((error: Error) => t.fail(error.message, { found: smallest }))
    t.ok(compared.headers > 0, `headers compared on ${compared.headers} answers`)
    backend.answer = (socket) => socket.write('HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok')
    const after = await nodeRead(`${url}${OTHER_PATH}`, 'GET', {})
    t.match(after, { status: 200, complete: true, faulted: false }, 'the gateway still answers')
  },
)

noCrashes()
