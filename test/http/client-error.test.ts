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
  const started = socket({ _httpMessage: { headersSent: true } })
  t.equal(answerClientError(Object.assign(new Error('late'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' }), started.stream), undefined)
  t.same(started.written, [])
  t.ok(started.stream.destroyed)
})

t.test('otherwise the answer is written in the error format and the socket closed', async (t) => {
  const fresh = socket({ _httpMessage: { headersSent: false } })
  const answered = answerClientError(Object.assign(new Error('bad'), { code: 'HPE_INVALID_METHOD' }), fresh.stream)
  t.equal(answered?.status, 400)
  await new Promise((resolve) => setImmediate(resolve))
  t.match(fresh.written.join(''), /^HTTP\/1\.1 400 Bad Request\r\n[^]*"errorName":"requestIsMalformed"/)
})
