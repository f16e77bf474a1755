import { EventEmitter } from 'node:events'
import { PassThrough } from 'node:stream'
import t from 'tap'
import { answerClientError, clientErrorName } from '../../lib/http/client-error.js'

/** A socket stand-in: what is written, and whether it was closed. */
function socket(extra: Record<string, unknown> = {}) {
  const written: string[] = []
  const stream = Object.assign(new PassThrough(), extra, {
    destroySoon() {
      stream.destroy()
    },
  })
  stream.on('data', (chunk: Buffer) => written.push(chunk.toString()))
  return { stream, written }
}

t.test('parser and timeout codes map to the error names of docs/checks.md (Refusals below HTTP)', async (t) => {
  t.equal(clientErrorName('HPE_HEADER_OVERFLOW'), 'headersAreTooLarge')
  t.equal(clientErrorName('ERR_HTTP_REQUEST_TIMEOUT'), 'requestTimedOut')
  t.equal(clientErrorName('HPE_HEADERS_TIMEOUT'), 'requestTimedOut')
  t.equal(clientErrorName('HPE_INVALID_CONSTANT'), 'requestIsMalformed')
  t.equal(clientErrorName(undefined), 'requestIsMalformed')
})

t.test('a reset connection or a response already started gets no answer, only a close', async (t) => {
  const reset = socket()
  t.equal(answerClientError(Object.assign(new Error('reset'), { code: 'ECONNRESET' }), reset.stream), undefined)
  t.ok(reset.stream.destroyed)
  const started = socket({ _httpMessage: { headersSent: true, req: { complete: false } } })
  t.equal(
    answerClientError(Object.assign(new Error('late'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' }), started.stream),
    undefined,
  )
  t.same(started.written, [])
  t.ok(started.stream.destroyed)
})

t.test(
  'an answer pending to a whole request (pipelined behind it, RFC 9112 9.6) gets no refusal ahead of it: it is sent, then the close',
  async (t) => {
    const response = Object.assign(new EventEmitter(), {
      headersSent: false,
      shouldKeepAlive: true,
      req: { complete: true },
    })
    const pending = socket({ _httpMessage: response })
    const bad = Object.assign(new Error('bad'), { code: 'HPE_INVALID_METHOD' })
    t.equal(answerClientError(bad, pending.stream), undefined)
    t.equal(answerClientError(bad, pending.stream), undefined, 'again, as node tells each refused read')
    await new Promise((resolve) => setImmediate(resolve))
    t.same(pending.written, [])
    t.equal(response.shouldKeepAlive, false, 'the answer says Connection: close')
    t.notOk(pending.stream.destroyed, 'not cut: the answer is still to be sent')
    t.equal(response.listenerCount('finish'), 1, 'one close, however many refused reads')
    response.emit('finish')
    t.ok(pending.stream.destroyed, 'closed once it is sent')

    const behind = Object.assign(new EventEmitter(), {
      headersSent: false,
      shouldKeepAlive: true,
      req: { complete: true },
    })
    const slow = socket({ _httpMessage: behind })
    const late = Object.assign(new Error('late'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' })
    t.equal(answerClientError(late, slow.stream), undefined)
    // Red before: a request behind it that timed out cut the connection, and the answer ahead was lost.
    t.notOk(slow.stream.destroyed, 'a head that timed out behind it: the answer ahead is still sent')
    behind.emit('finish')
    t.ok(slow.stream.destroyed, 'then the close')
  },
)

t.test('otherwise the answer is written in the error format and the socket closed', async (t) => {
  const fresh = socket({ _httpMessage: { headersSent: false, req: { complete: false } } })
  const answered = answerClientError(Object.assign(new Error('bad'), { code: 'HPE_INVALID_METHOD' }), fresh.stream)
  t.equal(answered?.status, 400)
  await new Promise((resolve) => setImmediate(resolve))
  t.match(fresh.written.join(''), /^HTTP\/1\.1 400 Bad Request\r\n[^]*"errorName":"requestIsMalformed"/)
  t.same(answered, { status: 400, errorName: 'requestIsMalformed' })
})

t.test(
  "HTTP/2's connection preface gets an empty SETTINGS frame, then GOAWAY HTTP_1_1_REQUIRED, and a close (RFC 9113)",
  async (t) => {
    const fresh = socket()
    const chunks: Buffer[] = []
    fresh.stream.on('data', (chunk: Buffer) => chunks.push(chunk))
    const answered = answerClientError(
      Object.assign(new Error('Pause on PRI/Upgrade'), { code: 'HPE_PAUSED_H2_UPGRADE' }),
      fresh.stream,
    )
    t.same(answered, { status: 0, errorName: 'HTTP_1_1_REQUIRED' })
    await new Promise((resolve) => setImmediate(resolve))
    const frames = Buffer.concat(chunks)
    t.same([...frames.subarray(0, 9)], [0, 0, 0, 4, 0, 0, 0, 0, 0], 'SETTINGS, empty, on stream 0')
    t.same([...frames.subarray(9, 18)], [0, 0, 8, 7, 0, 0, 0, 0, 0], 'GOAWAY, 8 bytes, on stream 0')
    t.equal(frames.readUInt32BE(18), 0, 'last stream id 0')
    t.equal(frames.readUInt32BE(22), 0xd, 'HTTP_1_1_REQUIRED')
    t.equal(frames.length, 26)
    t.ok(fresh.stream.destroyed)
  },
)
