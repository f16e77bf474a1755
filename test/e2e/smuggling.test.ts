import { connect } from 'node:net'
import t from 'tap'
import { AUTH, REQUEST_TYPE, SALE_PATH } from '../helpers/fixtures.js'
import { scanLogsForCards, watchCrashes } from '../helpers/logs.js'
import { startGateway } from '../helpers/surfaces.js'

/**
 * Request smuggling shapes beyond those of below-http.test.ts, on raw
 * sockets. Each is either refused (400 requestIsMalformed, connection closed)
 * or handled once with the framing the gateway's own parser saw; in both
 * cases every request the backend received is listed and compared, so a
 * request hidden in a body, or a body cut differently than the gateway cut
 * it, shows up as an extra or a changed entry.
 */
const noCrashes = watchCrashes(t)
const { port, backend } = await startGateway(t)
const HIDDEN = 'GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n'

interface Exchange {
  /** The status line of every response on the connection, in order. */
  readonly statuses: number[]
  readonly errorNames: string[]
  /** What the backend received meanwhile: method, path and body of each request. */
  readonly backend: string[]
}

/** Writes the bytes on a new connection, reads until the server closes it (at most 3 s), and lists what the backend saw meanwhile. */
async function exchange(bytes: string): Promise<Exchange> {
  const before = backend.received.length
  const startedBefore = backend.started
  const text = await new Promise<string>((resolve) => {
    const socket = connect(port, '127.0.0.1')
    const chunks: Buffer[] = []
    const cap = setTimeout(() => socket.destroy(), 3000)
    socket.on('data', (chunk: Buffer) => chunks.push(chunk))
    socket.on('error', () => undefined)
    socket.on('close', () => {
      clearTimeout(cap)
      resolve(Buffer.concat(chunks).toString('latin1'))
    })
    socket.write(bytes)
  })
  const received = backend.received
    .slice(before)
    .map((request) => `${request.method} ${request.url} ${JSON.stringify(request.body.toString('latin1'))}`)
  // A request whose head reached the backend but whose body never completed is listed too.
  const partial = backend.started - startedBefore - received.length
  return {
    statuses: [...text.matchAll(/^HTTP\/1\.1 (\d{3}) /gm)].map((match) => Number(match[1])),
    errorNames: [...text.matchAll(/"errorName":"(\w+)"/g)].map((match) => match[1] as string),
    backend: partial === 0 ? received : [...received, `${partial} incomplete`],
  }
}

/** A request; `Connection: close` first, so that a handled exchange ends with the server closing the connection. */
const post = (path: string, head: string, body: string, close = true) =>
  `POST ${path} HTTP/1.1\r\nHost: a\r\n${close ? 'Connection: close\r\n' : ''}${head}\r\n${body}`
const chunkedHello = '5\r\nhello\r\n0\r\n\r\n'

const refused: Record<string, string> = {
  'Transfer-Encoding: xchunked': post('/x', 'Transfer-Encoding: xchunked\r\n', chunkedHello),
  'Transfer-Encoding: chunked, identity (chunked not last)': post(
    '/x',
    'Transfer-Encoding: chunked, identity\r\n',
    chunkedHello,
  ),
  'two Transfer-Encoding headers': post(
    '/x',
    'Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n',
    chunkedHello,
  ),
  'Transfer-Encoding with a space before the colon': post('/x', 'Transfer-Encoding : chunked\r\n', chunkedHello),
  'Transfer-Encoding folded onto a continuation line': post('/x', 'Transfer-Encoding:\r\n chunked\r\n', chunkedHello),
  'a header line starting with white space': post('/x', ' Transfer-Encoding: chunked\r\n', chunkedHello),
  'Transfer-Encoding with Content-Length on a payment': post(
    SALE_PATH,
    `Authorization: ${AUTH}\r\nContent-Type: ${REQUEST_TYPE}\r\nContent-Length: 40\r\nTransfer-Encoding: chunked\r\n`,
    `0\r\n\r\n${HIDDEN}`,
  ),
  'Content-Length: 5, 5': post('/x', 'Content-Length: 5, 5\r\n', 'hello'),
  'two equal Content-Lengths': post('/x', 'Content-Length: 5\r\nContent-Length: 5\r\n', 'hello'),
  'Content-Length: +5': post('/x', 'Content-Length: +5\r\n', 'hello'),
  'Content-Length: -1': post('/x', 'Content-Length: -1\r\n', 'hello'),
  'bare LF inside the chunked framing': post('/x', 'Transfer-Encoding: chunked\r\n', '5\nhello\n0\n\n'),
  'a bare CR as a line end': 'POST /x HTTP/1.1\rHost: a\r\nContent-Length: 0\r\n\r\n',
  'a chunk size that overflows': post('/x', 'Transfer-Encoding: chunked\r\n', 'ffffffffffffffffff\r\nx\r\n0\r\n\r\n'),
  'chunk-extension flood: 20 KiB of extensions on one chunk': post(
    '/x',
    'Transfer-Encoding: chunked\r\n',
    `1;${'a=b;'.repeat(5000)}\r\nx\r\n0\r\n\r\n`,
  ),
  'a NUL byte in a header value': post('/x', 'X-A: a\0b\r\nContent-Length: 0\r\n', ''),
}

for (const [name, bytes] of Object.entries(refused)) {
  t.test(`${name}: 400 requestIsMalformed, the backend saw nothing`, async (t) => {
    const answer = await exchange(bytes)
    t.same(answer.statuses, [400])
    t.same(answer.errorNames, ['requestIsMalformed'])
    t.same(answer.backend, [])
  })
}

t.test('Transfer-Encoding with leading white space is plain chunked: one request, the body de-chunked', async (t) => {
  for (const space of [' ', '\t', '  ']) {
    const answer = await exchange(post('/x', `Transfer-Encoding:${space}chunked\r\n`, chunkedHello))
    t.same(answer.statuses, [201], JSON.stringify(space))
    t.same(answer.backend, ['POST /x "hello"'])
  }
})

t.test('Transfer-Encoding: identity, chunked (chunked last) is chunked: one request, the body whole', async (t) => {
  const answer = await exchange(post('/x', 'Transfer-Encoding: identity, chunked\r\n', chunkedHello))
  t.same(answer.statuses, [201])
  t.same(answer.backend, ['POST /x "hello"'])
})

t.test('many chunks, each with a short extension: one request, the body whole', async (t) => {
  const answer = await exchange(
    post('/x', 'Transfer-Encoding: chunked\r\n', `${'1;ext=v\r\nx\r\n'.repeat(3000)}0\r\n\r\n`),
  )
  t.same(answer.statuses, [201])
  t.same(answer.backend, [`POST /x ${JSON.stringify('x'.repeat(3000))}`])
})

/** More header lines than node's maxHeadersCount (2000): from Node 26 its parser refuses them (HPE_HEADER_OVERFLOW), so no framing question is left. */
const junk = 'a:b\r\n'.repeat(2100)

for (const [last, body] of [
  ['Content-Length last, a request hidden in the body', `hello${HIDDEN}`],
  ['Transfer-Encoding last', chunkedHello],
] as const) {
  t.test(`more headers than maxHeadersCount, ${last}: 431, nothing forwarded`, async (t) => {
    const framing = last.startsWith('Content-Length')
      ? `Content-Length: ${body.length}\r\n`
      : 'Transfer-Encoding: chunked\r\n'
    const answer = await exchange(post('/x', `${junk}${framing}`, body))
    t.same(answer.statuses, [431])
    t.same(answer.backend, [], 'the backend sees nothing')
  })
}

t.test(
  'more headers than maxHeadersCount on a payment, Content-Length last: 431 headersAreTooLarge, nothing forwarded',
  async (t) => {
    const body = `{}${HIDDEN}`
    const head = `Authorization: ${AUTH}\r\nContent-Type: ${REQUEST_TYPE}\r\n${junk}Content-Length: ${body.length}\r\n`
    const answer = await exchange(post(SALE_PATH, head, body))
    t.same(answer.statuses, [431])
    t.same(answer.errorNames, ['headersAreTooLarge'])
    t.same(answer.backend, [])
  },
)

t.test(
  'more headers than maxHeadersCount with Authorization beyond them: 431, and the unread body is not parsed as a request',
  async (t) => {
    const body = `{}${HIDDEN}`
    const head = `Content-Type: ${REQUEST_TYPE}\r\n${junk}Authorization: ${AUTH}\r\nContent-Length: ${body.length}\r\n`
    const answer = await exchange(post(SALE_PATH, head, body))
    t.same(answer.statuses, [431])
    t.same(answer.backend, [])
  },
)

t.test('a request hidden in a payment body: bodyIsNotJson, nothing forwarded', async (t) => {
  const body = `{"transactionReference":"x"}\r\n\r\n${HIDDEN}`
  const answer = await exchange(
    post(
      SALE_PATH,
      `Authorization: ${AUTH}\r\nContent-Type: ${REQUEST_TYPE}\r\nContent-Length: ${body.length}\r\n`,
      body,
    ),
  )
  t.same(answer.statuses, [400])
  t.same(answer.errorNames, ['bodyIsNotJson'])
  t.same(answer.backend, [])
})

t.test(
  'a refusal before the body is read closes the connection: a request pipelined after the body is never handled',
  async (t) => {
    const body = HIDDEN
    const answer = await exchange(
      post(
        SALE_PATH,
        `Authorization: Basic eDp5\r\nContent-Type: ${REQUEST_TYPE}\r\nContent-Length: ${body.length}\r\n`,
        body,
        false,
      ) + HIDDEN,
    )
    t.same(answer.statuses, [401])
    t.same(answer.backend, [])
  },
)

t.test(
  'a request pipelined after a complete one is its own request, framed by the gateway: two answers, two backend requests',
  async (t) => {
    const answer = await exchange(
      post('/x', 'Content-Length: 5\r\n', 'hello', false) + HIDDEN.replace('\r\n\r\n', '\r\nConnection: close\r\n\r\n'),
    )
    t.same(answer.statuses, [201, 201])
    t.same(answer.backend, ['POST /x "hello"', 'GET /smuggled ""'])
  },
)

scanLogsForCards(t)
noCrashes()
