import t from 'tap'
import { REQUEST_TYPE, RESPONSE_TYPE, saleBody } from '../helpers/fixtures.js'
import { paymentHeaders, send } from '../helpers/http.js'
import { startGateway } from '../helpers/surfaces.js'

/**
 * A media type followed by thousands of empty parameters (`; ; ; ... ;x`) once took a backtracking
 * pattern exponential time, and no other request was answered meanwhile (docs/reliability.md, threat model).
 */
const EMPTIES = '; '.repeat(6000)

t.test('a Content-Type or Accept with 6,000 empty parameters is answered, and other requests meanwhile', async (t) => {
  const { backend, url } = await startGateway(t)
  const answers = await Promise.all([
    send(url, { headers: paymentHeaders({ 'content-type': `${REQUEST_TYPE}${EMPTIES}x` }), body: saleBody() }),
    send(url, { headers: paymentHeaders({ accept: `${RESPONSE_TYPE}${EMPTIES}x` }), body: saleBody() }),
    send(url, { method: 'GET', path: '/other' }),
    send(url, { headers: paymentHeaders({ 'content-type': `${REQUEST_TYPE}${EMPTIES}` }), body: saleBody() }),
  ])
  t.same(
    answers.map((answer) => answer.status),
    [415, 406, 201, 201],
  )
  t.equal(backend.received.length, 2, 'the passed-through request and the valid payment reached the backend')
})
