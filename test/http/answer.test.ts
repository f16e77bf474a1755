import { request } from 'node:http'
import t from 'tap'
import { answerOf, flatHeaders, rawAnswer, sendError, sendRejection, writeAnswer } from '../../lib/http/answer.js'
import { ERROR_CONTENT_TYPE, reject, serializeError } from '../../lib/errors.js'
import { serveOnLoopback } from '../helpers/servers.js'

/** One GET to a loopback port: its status, headers and body, or the error that cut it. */
function get(port: number): Promise<{ status: number; headers: Record<string, unknown>; body: string } | Error> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, agent: false }, (res) => {
      let body = ''
      res.on('data', (chunk: Buffer) => (body += chunk.toString()))
      res.on('end', () => resolve({ status: res.statusCode as number, headers: res.headers, body }))
      res.on('error', resolve)
    })
    req.on('error', resolve)
    req.end()
  })
}

t.test("answerOf: the status, the one serializer's body, its type and length, the rejection's headers", async (t) => {
  const rejection = reject('methodIsNotAllowed', { headers: { allow: 'POST' } })
  const answer = answerOf(rejection)
  t.equal(answer.status, 405)
  t.equal(answer.body.toString(), serializeError(rejection.body))
  t.equal(ERROR_CONTENT_TYPE, 'application/json')
  t.same(answer.headers, { 'content-type': ERROR_CONTENT_TYPE, 'content-length': answer.body.length, allow: 'POST' })
  t.same(answerOf(reject('bodyIsEmpty')).headers, {
    'content-type': ERROR_CONTENT_TYPE,
    'content-length': answerOf(reject('bodyIsEmpty')).body.length,
  })
})

t.test('answerOf: Connection: close only for a rejection whose body was not read', async (t) => {
  t.equal(answerOf(reject('bodyIsTooLarge', { close: true })).headers.connection, 'close')
  t.notOk('connection' in answerOf(reject('bodyIsTooLarge')).headers)
  t.notOk('connection' in answerOf(reject('bodyIsTooLarge', { close: false })).headers)
  // Bytes, not characters: a message may hold any character.
  const text = serializeError(reject('bodyIsEmpty', { message: 'é' }).body)
  t.equal(answerOf(reject('bodyIsEmpty', { message: 'é' })).headers['content-length'], text.length + 1)
})

t.test('rawAnswer writes header values as latin1, as node writes them', async (t) => {
  const answer = { status: 400, headers: { 'x-note': 'caf\u00e9' }, body: Buffer.from('{}') }
  t.same(
    rawAnswer(answer),
    Buffer.concat([Buffer.from('HTTP/1.1 400 Bad Request\r\nx-note: caf\u00e9\r\n\r\n', 'latin1'), answer.body]),
  )
  t.ok(rawAnswer(answer).includes(Buffer.from([0x66, 0xe9, 0x0d, 0x0a])), 'é is one byte')
})

t.test('flatHeaders and rawAnswer: the same headers, in order, as a raw list and as HTTP/1.1 bytes', async (t) => {
  const answer = answerOf(reject('requestTimedOut', { close: true }))
  t.same(flatHeaders(answer), [
    'content-type',
    ERROR_CONTENT_TYPE,
    'content-length',
    String(answer.body.length),
    'connection',
    'close',
  ])
  const raw = rawAnswer(answer).toString('latin1')
  t.equal(
    raw,
    `HTTP/1.1 408 Request Timeout\r\ncontent-type: ${ERROR_CONTENT_TYPE}\r\ncontent-length: ${answer.body.length}\r\nconnection: close\r\n\r\n${answer.body.toString('latin1')}`,
  )
})

t.test('writeAnswer, sendRejection and sendError answer on a node response', async (t) => {
  const routes = [
    (res: import('node:http').ServerResponse) => writeAnswer(res, answerOf(reject('bodyIsNotJson'))),
    (res: import('node:http').ServerResponse) =>
      sendRejection(res, reject('headerIsMissing', { headerName: 'Accept' })),
    (res: import('node:http').ServerResponse) => sendError(res, 'entityIsNotConfigured', { message: 'no such entity' }),
  ]
  let next = 0
  const { port } = await serveOnLoopback(t, (_req, res) =>
    (routes[next++] as (res: import('node:http').ServerResponse) => void)(res),
  )
  t.match(await get(port), {
    status: 400,
    headers: { 'content-type': ERROR_CONTENT_TYPE },
    body: serializeError(reject('bodyIsNotJson').body),
  })
  t.match(await get(port), {
    status: 400,
    body: serializeError(reject('headerIsMissing', { headerName: 'Accept' }).body),
  })
  const sent = await get(port)
  t.match(sent, {
    status: reject('entityIsNotConfigured').status,
    body: serializeError({ errorName: 'entityIsNotConfigured', message: 'no such entity' }),
  })
})

t.test('writeAnswer after the head went out cuts the connection instead of a second status', async (t) => {
  const { port } = await serveOnLoopback(t, (_req, res) => {
    res.writeHead(200, { 'content-length': '10' })
    res.write('12345')
    writeAnswer(res, answerOf(reject('internalErrorOccurred')))
  })
  t.type(await get(port), Error)
})
