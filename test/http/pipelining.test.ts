import { EventEmitter } from 'node:events'
import type { ServerResponse } from 'node:http'
import t, { type Test } from 'tap'
import { inTurn } from '../../lib/http/pipelining.js'
import { AUTH, REQUEST_TYPE, SALE_PATH, saleBody } from '../helpers/fixtures.js'
import { raw } from '../helpers/http.js'
import { everyEmbedding, type Embedding } from '../helpers/surfaces.js'

/** A response as node hands it to a request handler: maybe a socket, and a `socket` event when one comes. */
function response(socket: { writableEnded: boolean; destroyed: boolean } | null): ServerResponse & EventEmitter {
  return Object.assign(new EventEmitter(), { socket }) as unknown as ServerResponse & EventEmitter
}

t.test('a request with a usable socket is handled at once', async (t) => {
  let handled = 0
  inTurn(response({ writableEnded: false, destroyed: false }), () => handled++)
  t.equal(handled, 1)
})

t.test('a pipelined request waits for its socket, then is handled', async (t) => {
  let handled = 0
  const res = response(null)
  inTurn(res, () => handled++)
  t.equal(handled, 0, 'not before its turn')
  Object.assign(res, { socket: { writableEnded: false, destroyed: false } })
  res.emit('socket')
  t.equal(handled, 1)
})

t.test('a request whose connection is closing is dropped', async (t) => {
  let handled = 0
  inTurn(response({ writableEnded: true, destroyed: false }), () => handled++)
  inTurn(response({ writableEnded: false, destroyed: true }), () => handled++)
  const late = response(null)
  inTurn(late, () => handled++)
  Object.assign(late, { socket: { writableEnded: true, destroyed: false } })
  late.emit('socket')
  t.equal(handled, 0)
})

/**
 * RFC 9112 9.6: a payment pipelined behind a refusal that closes the
 * connection must never reach the application or the backend: its answer
 * could never be sent, and its client would send it again.
 */
/** A payment of its own (its own `transactionReference`), as raw HTTP/1.1. */
function payment(transactionReference: string, close = false): string {
  const body = JSON.stringify(saleBody({ transactionReference }))
  const connection = close ? 'Connection: close\r\n' : ''
  return `POST ${SALE_PATH} HTTP/1.1\r\nHost: a\r\n${connection}Authorization: ${AUTH}\r\nContent-Type: ${REQUEST_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
}
const body = JSON.stringify(saleBody())
const valid = payment('pipelined-1')
const lastOnConnection = payment('pipelined-2', true)
// No credentials and an unread body: refused with `Connection: close`.
const refused = `POST ${SALE_PATH} HTTP/1.1\r\nHost: a\r\nContent-Type: ${REQUEST_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`

/** Written, not ended: node aborts the pending requests of a client that half-closes. */
const exchange = (port: number, requests: string) => raw(port, requests, { keepOpen: true })

/** One gate mounted in all four ways, each counting what reached its application; closed when the test ends. */
async function hosts(t: Test): Promise<Embedding[]> {
  return (await everyEmbedding(t)).embeddings
}

t.test('a payment pipelined behind a closing refusal is never handled', async (t) => {
  const all = await hosts(t)
  for (const host of all) {
    const answer = await exchange(host.port, refused + valid)
    t.match(answer, /^HTTP\/1.1 401 /, `${host.name}: the refusal`)
    t.equal(answer.match(/HTTP\/1.1 /g)?.length, 1, `${host.name}: one answer only`)
    // A payment on a new connection afterwards: once it is answered, the pipelined one would have been too.
    t.match(
      await exchange(host.port, lastOnConnection),
      /^HTTP\/1.1 201 /,
      `${host.name}: a payment on its own connection`,
    )
    t.equal(host.handled(), 1, `${host.name}: only that payment was handled (${host.handled()})`)
  }
})

t.test('a payment pipelined behind a complete answer is handled in turn', async (t) => {
  const all = await hosts(t)
  for (const host of all) {
    const answer = await exchange(host.port, valid + lastOnConnection)
    t.equal(answer.match(/HTTP\/1.1 201 /g)?.length, 2, `${host.name}: two answers`)
    t.equal(host.handled(), 2, `${host.name}: both handled`)
  }
})
