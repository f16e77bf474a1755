import { EventEmitter } from 'node:events'
import type { ServerResponse } from 'node:http'
import t from 'tap'
import { inTurn } from '../lib/screen.js'

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
