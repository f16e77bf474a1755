import { createServer, type IncomingMessage } from 'node:http'
import t from 'tap'
import { answerFault } from '../../lib/proxy/answer-fault.js'
import { GatewayResponse, track, type Exchange } from '../../lib/proxy/exchange.js'
import { send } from '../helpers/http.js'
import { closeServer, listenOnLoopback } from '../helpers/servers.js'

/**
 * The fault's answer is written whatever state a relay that threw left the response in: a client is
 * never left without an answer (docs/backend-faults.md). undici hands a throw of the payment relay's to
 * its onResponseError, and http-proxy-3's relay catches its own (relay.ts), each then answering here.
 */
t.test('after a head node refused, the fault is answered with its own status and reason', async (t) => {
  const thrown: unknown[] = []
  const exchanges: Exchange[] = []
  const server = createServer<typeof IncomingMessage, typeof GatewayResponse>(
    { ServerResponse: GatewayResponse },
    (req, res) => {
      const exchange = track(res, { draining: false }, req.url === '/pay' ? 'sale' : 'other', 'id-1', undefined)
      exchanges.push(exchange)
      req.resume()
      try {
        // A reason phrase with a control character, as a backend may send one: node refuses the head.
        res.writeHead(201, 'Cre\u0001ated', ['content-type', 'application/json'])
      } catch (error) {
        try {
          answerFault(res, exchange, 'reset', error as Error)
        } catch (again) {
          // Not the gateway's way: only so that this test fails rather than hangs.
          thrown.push(again)
          res.destroy()
        }
      }
    },
  )
  const port = await listenOnLoopback(server)
  t.teardown(() => closeServer(server))
  // A payment's fault and a passed-through path's: each the table's 500.
  for (const path of ['/pay', '/other']) {
    const reply = await send(port, { method: 'GET', path }).catch((error: unknown) => error)
    t.same(thrown, [], `${path}: answerFault did not throw`)
    t.match(reply, { status: 500, json: { errorName: 'internalErrorOccurred' } }, `${path}: the fault's answer`)
    t.match(reply, { headers: { 'x-request-id': 'id-1' } }, `${path}: its id`)
  }
  t.match(exchanges, [{ backendError: 'reset', errorName: 'internalErrorOccurred' }, { backendError: 'reset' }])
})
